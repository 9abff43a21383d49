"""The seed ranges and the episode player that every evaluation (planner, gate, bench) uses.

Seed policy. Every evaluated episode is named by an integer seed and starts from
`game.init(PRNGKey(seed))`; its search keys come from `fold_in(PRNGKey(seed), 1)`, one split per
decision, so a seed plays the same game under every condition and in every batch (paired
comparisons, resumable evaluations). The ranges are disjoint:

- train: `[0, TUNING_SEED_BASE)`, the runs' `--seed`; training games come from splits of
  `PRNGKey(seed)`, never from `PRNGKey(s)` of an evaluation seed s.
- tuning: `TUNING_SEED_BASE + i`: model selection (the planner's and the gate's in-training
  evaluations, which pick `best.msgpack`, and the best fixed k of the gate report).
- eval: `EVAL_SEED_BASE + i`: reported numbers only (`rtplan eval`, `rtplan cross-eval`),
  never looked at while training or tuning.
- holdout: `HOLDOUT_SEED_BASE + i`: the pre-registered evaluation (docs/preregistration.md),
  fixed before any gate was compared on it; a range no earlier number used.

Clock games (`planner.matches.play_match`) draw each opening from its seed the same way and
play it twice, once with each colour.

Bounded compile set: `eval_runner` groups games by k on a doubling ladder of batch sizes (at
most `len(budgets) * (log2(episodes) + 2)` option executables), and `play_match` pads its
games to the same ladder (`GROWTH`), so a long evaluation stays far under the kernel's default
`vm.max_map_count` (65,530 memory mappings; each XLA:CPU executable holds some).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rtplan import games
from rtplan.harness.stats import standard_error
from rtplan.planner.batching import SKIP, OptionRunner
from rtplan.planner.options import Future, Planner

__all__ = [
    "EVAL_SEED_BASE",
    "HOLDOUT_SEED_BASE",
    "SEED_RANGES",
    "SPLITS",
    "TUNING_SEED_BASE",
    "Chooser",
    "Episodes",
    "Misses",
    "always",
    "cycle",
    "eval_runner",
    "play",
    "play_from",
    "play_policy_only",
    "random_k",
    "seeds_of",
    "split_of",
    "start",
]

TUNING_SEED_BASE = 1_000_000
EVAL_SEED_BASE = 2_000_000
HOLDOUT_SEED_BASE = 2_500_000
#: Split name -> its seeds (disjoint; `seeds_of` hands out the first n of one).
SEED_RANGES = {
    "train": range(0, TUNING_SEED_BASE),
    "tuning": range(TUNING_SEED_BASE, EVAL_SEED_BASE),
    "eval": range(EVAL_SEED_BASE, HOLDOUT_SEED_BASE),
    "holdout": range(HOLDOUT_SEED_BASE, 3_000_000),
}
#: The evaluation splits -> their first seed.
SPLITS = {"tuning": TUNING_SEED_BASE, "eval": EVAL_SEED_BASE, "holdout": HOLDOUT_SEED_BASE}
#: `choose(states, alive, t) -> ks`: the budgets of `[B]` decision states (host ints).
Chooser = Callable[[games.State, np.ndarray, int], np.ndarray]
#: `misses(t, ks) -> [B]` bool: which games' planned actions miss their deadline at decision t,
#: given their budgets `ks` (a simulated deployment: `gate.committed.latency.decision_misses`).
Misses = Callable[[int, np.ndarray], np.ndarray]


def seeds_of(split: str, episodes: int) -> np.ndarray:
    """The first `episodes` seeds `[episodes]` of an evaluation split ("tuning", "eval" or
    "holdout")."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {sorted(SPLITS)}")
    if not 0 <= episodes <= len(SEED_RANGES[split]):
        raise ValueError(f"{episodes} episodes do not fit the {split} seed range")
    return SPLITS[split] + np.arange(episodes)


def split_of(seed: int) -> str:
    """The range ("train", "tuning" or "eval") that holds `seed`."""
    for name, seeds in SEED_RANGES.items():
        if seed in seeds:
            return name
    raise ValueError(f"seed {seed} is in no seed range")


@dataclasses.dataclass
class Episodes:
    """What one condition did on each seed.

    Committed games: one episode per seed. Clock games (`play_match`): two games per seed,
    player A first on the first half, second on the other half.
    """

    seeds: np.ndarray  # [E]
    returns: np.ndarray  # [E] undiscounted return (committed) or A's score in {0, 0.5, 1}
    frames: np.ndarray  # [E] frames (committed) or plies (clock) played
    ks: list[np.ndarray]  # per episode: the budget of each decision of A (0: policy-only)
    decision_frames: list[np.ndarray]  # per episode: the frame of each decision (committed)
    features: dict[str, list[np.ndarray]]  # per feature, per episode: its value at decisions
    actions: list[np.ndarray] | None = None  # per episode: the action of every frame (if asked)
    clocks: np.ndarray | None = None  # [E, 2] clock games: A's and B's ticks left at the end
    game_ids: list[str] | None = None  # clock games: each game's identity (`game_id`)
    missed: list[np.ndarray] | None = None  # per episode: each decision's miss (if simulated)
    # committed="plan" (`play_from`): each game's plan after its last option, (plan [E, H],
    # plan_len [E]), which play continuing from the final states commits to (`play_from(plan=)`).
    plan: tuple[jax.Array, jax.Array] | None = None

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def se(self) -> float:
        """Standard error of the mean return (ddof 1)."""
        return standard_error(self.returns)

    @property
    def decisions(self) -> np.ndarray:
        """`[E]` decisions taken (committed) or moves by player A (clock)."""
        return np.array([len(k) for k in self.ks], np.int64)

    def __str__(self) -> str:
        return f"{self.mean:.2f} +- {self.se:.2f} (n={len(self.returns)})"


def always(k: int) -> Chooser:
    """Always-k: every decision plans with budget k."""
    return lambda states, alive, t: np.full(alive.shape, k)


def cycle(ks: Sequence[int]) -> Chooser:
    """A fixed cycle of budgets: decision t plays `ks[t % len(ks)]` (always-k is `cycle([k])`)."""
    ks = np.asarray(ks)
    return lambda states, alive, t: np.full(alive.shape, ks[t % len(ks)])


def random_k(budgets: Sequence[int], seeds: np.ndarray) -> Chooser:
    """Uniform random k per decision, from one generator per seed (so episode i's draws do
    not depend on which other games share its batch)."""
    rngs = [np.random.default_rng([int(s), 7]) for s in seeds]
    budgets = np.asarray(budgets)
    return lambda states, alive, t: np.array([budgets[r.integers(len(budgets))] for r in rngs])


def eval_runner(
    planner: Planner, episodes: int, *, future: Future | None = None, devices: int = 1
) -> OptionRunner:
    """The `OptionRunner` of an evaluation of `episodes` games: group sizes on a doubling ladder,
    so it compiles at most `len(budgets) * (log2(episodes) + 2)` options, whatever the play."""
    return OptionRunner(planner, max_batch=episodes, future=future, devices=devices)


@functools.lru_cache(maxsize=1)
def _select_fn():
    # Jitted once per process: `alive`-row select of two state batches.
    return jax.jit(games.tree_where)


# Jitted once per game and kept: an evaluation runs every few training iterations, and each
# fresh trace of an un-jitted `vmap(game.init)` (its loops and conds) or of a new lambda
# compiled new executables, ~1,200 memory mappings per evaluation, until the process hit the
# kernel's `vm.max_map_count` (65,530) and LLVM failed with "Cannot allocate memory".
@functools.lru_cache(maxsize=8)
def _start_fn(game: games.Game):
    def start(seeds):
        keys = jax.vmap(jax.random.PRNGKey)(seeds)
        states = jax.vmap(game.init)(keys)
        return states, jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)

    return jax.jit(start)


def start(game: games.Game, seeds: np.ndarray) -> tuple[games.State, jax.Array]:
    """`[E]` games as `play` starts them: the states of `game.init(PRNGKey(seed))` and their
    carried option keys `fold_in(PRNGKey(seed), 1)` (`play_from` continues from them)."""
    return _start_fn(game)(jnp.asarray(seeds, jnp.uint32))


_split_keys = jax.jit(jax.vmap(lambda k: jax.random.split(k, 2)))


def play(
    runner: OptionRunner,
    planner_params,
    seeds: np.ndarray,
    choose: Chooser,
    *,
    max_decisions: int | None = None,
    features: Callable | None = None,
    record_actions: bool = False,
    future_params=None,
    misses: Misses | None = None,
    fallback: str = "game",
) -> Episodes:
    """Plays one episode per seed with budgets from `choose`, to each episode's end.

    Episode i starts from `game.init(PRNGKey(seeds[i]))`; its option keys are split from
    `fold_in(PRNGKey(seeds[i]), 1)` per decision, so a seed plays the same game under every
    condition. Finished games are skipped (no option is computed for them).

    Args:
        runner: runs each game's chosen option (grouped by k); `eval_runner` for a bounded
            compile set.
        planner_params: the frozen planner's parameters.
        seeds: `[E]` episode seeds.
        choose: the budget policy.
        max_decisions: stop after this many decisions (None: the game's end or horizon).
        features: optional jitted `states -> {name: [E] array}` recorded at each decision.
        record_actions: also keep the action applied at every frame (reflex and planned).
        future_params: the parameters of the runner's `future` (a runner built with one).
        misses: which planned actions miss their deadline, per decision (None: none, the
            simulated clock); a missed option's landing frame plays the `fallback`
            (`Planner.option`), and `Episodes.missed` records them.
        fallback: "game" or "reflex": what a missed landing frame plays.

    Returns:
        The `Episodes`, in the order of `seeds`.
    """
    seeds = np.asarray(seeds)
    states, keys = start(runner.planner.game, seeds)
    played, _, _ = play_from(
        runner,
        planner_params,
        states,
        keys,
        choose,
        seeds=seeds,
        max_decisions=max_decisions,
        features=features,
        record_actions=record_actions,
        future_params=future_params,
        misses=misses,
        fallback=fallback,
    )
    return played


def play_from(
    runner: OptionRunner,
    planner_params,
    states: games.State,
    keys: jax.Array,
    choose: Chooser,
    *,
    seeds: np.ndarray,
    until: np.ndarray | None = None,
    max_decisions: int | None = None,
    features: Callable | None = None,
    record_actions: bool = False,
    future_params=None,
    misses: Misses | None = None,
    fallback: str = "game",
    plan: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[Episodes, games.State, jax.Array]:
    """`play` from given states: `[E]` games from `states` with carried option keys `keys`
    (each decision splits its option key off the carried one), named `seeds` in the result.

    `until`: `[E]` frames; a game stops once its frame reaches its own (None: its end). The
    chooser keeps an option from crossing it where that matters (`gate.counterfactual.values`).
    Returns the `Episodes` (returns summed from `states` on), the final states and the carried
    keys after the last decision, so play can continue from there with the same key schedule.

    Under `committed="plan"` (the runner's planner config) each game's plan is threaded from one
    option to the next (`OptionOutput.plan`). The first option of a call commits to `plan`, the
    games' plans at `states` (`Episodes.plan` of the play that reached them; None: no plan, the
    reflex, as at an episode's start); `Episodes.plan` holds each game's plan at the end.
    """
    n = len(seeds)
    limit = None if until is None else np.asarray(until)
    returns, frames = np.zeros(n), np.zeros(n, np.int64)
    ks, at, feats, acts, missed = [], [], {}, [], []

    def running(states) -> np.ndarray:
        go = ~np.asarray(states.done)
        return go if limit is None else go & (np.asarray(states.frame) < limit)

    alive = running(states)
    select = _select_fn()
    # committed="plan": each game's previous plan, (plan [E, H], plan_len [E]); none at first.
    by_plan = runner.planner.config.committed == "plan"
    if not by_plan and plan is not None:
        raise ValueError("this runner's planner commits to the reflex: no plan to start from")
    if by_plan and plan is None:
        plan = runner.planner.empty_plan(n)
    t = 0
    while alive.any() and (max_decisions is None or t < max_decisions):
        k = np.where(alive, np.asarray(choose(states, alive, t)), SKIP)
        ks.append(k)
        at.append(np.asarray(states.frame))
        if features is not None:
            for name, v in jax.device_get(features(states)).items():
                feats.setdefault(name, []).append(np.asarray(v))
        pair = _split_keys(keys)
        # A finished game's key stays as it was (its schedule ends there).
        keys = jnp.where(jnp.asarray(alive)[:, None], pair[:, 0], keys)
        option_keys = pair[:, 1]
        miss = None
        if misses is not None:
            miss = np.asarray(misses(t, k), bool) & alive
            missed.append(miss)
        out = runner(
            planner_params,
            option_keys,
            states,
            k,
            future_params=future_params,
            **({} if miss is None else dict(miss=jnp.asarray(miss), fallback=fallback)),
            **({} if plan is None else dict(plan=plan)),
        )
        if plan is not None:
            plan = select(jnp.asarray(alive), (out.plan, out.plan_len), plan)
        if record_actions:
            acts.append(np.where(alive[:, None], np.asarray(out.actions), -1))
        returns += np.where(alive, np.asarray(out.reward), 0.0)
        states = select(jnp.asarray(alive), out.next_state, states)
        alive &= running(states)
        t += 1
    frames[:] = np.asarray(states.frame)
    if not ks:  # nothing to play
        ks, at = [np.full(n, SKIP)], [frames.copy()]
    ks_arr, at_arr = np.stack(ks, 1), np.stack(at, 1)
    played = ks_arr != SKIP
    per = [played[i] for i in range(n)]
    actions = None
    if record_actions:
        # [E, decisions * max_k], padded with -1 past each option's own k and after the end.
        flat = np.concatenate(acts, 1) if acts else np.zeros((n, 0), np.int64)
        # An option cut short by the episode's end still lists its k actions: keep the played.
        actions = [row[row >= 0][: frames[i]] for i, row in enumerate(flat)]
    episodes = Episodes(
        seeds=np.asarray(seeds),
        returns=returns,
        frames=frames,
        ks=[ks_arr[i][per[i]] for i in range(n)],
        decision_frames=[at_arr[i][per[i]] for i in range(n)],
        features={name: [np.stack(v, 1)[i][per[i]] for i in range(n)] for name, v in feats.items()},
        actions=actions,
        missed=None if misses is None else _per_episode(missed, per, n),
        plan=plan,
    )
    return episodes, states, keys


def _per_episode(rows: list[np.ndarray], played: list[np.ndarray], n: int) -> list[np.ndarray]:
    """Per episode, the values of the decisions it played, from `[E]` rows per decision."""
    if not rows:
        return [np.zeros(0, bool) for _ in range(n)]
    table = np.stack(rows, 1)
    return [table[i][played[i]] for i in range(n)]


@functools.lru_cache(maxsize=8)
def _policy_only_fn(planner: Planner):
    """Jitted once per planner (the params are an argument, not baked-in constants)."""
    game = planner.game

    def run(params, states):
        def body(carry):
            states, ret = carry
            actions = planner.reflex_action(params, states)
            nxt = jax.vmap(game.step)(states, actions)
            return nxt, ret + jnp.where(states.done, 0.0, nxt.reward)

        return jax.lax.while_loop(
            lambda c: ~jnp.all(c[0].done), body, (states, jnp.zeros(states.frame.shape))
        )

    return jax.jit(run)


def play_policy_only(planner: Planner, params, seeds: np.ndarray) -> Episodes:
    """The reflex (argmax of the raw policy) every frame, no search, one episode per seed."""
    game = planner.game
    seeds = np.asarray(seeds)
    if not game.horizon:
        raise ValueError(f"{game.id} has no horizon: policy-only play needs one to end")
    states, _ = start(game, seeds)
    final, ret = _policy_only_fn(planner)(params, states)
    frames = np.asarray(final.frame)
    return Episodes(
        seeds=seeds,
        returns=np.asarray(ret, np.float64),
        frames=frames,
        # One reflex per frame, no decisions: nothing to record per decision.
        ks=[np.zeros(0, np.int64) for _ in frames],
        decision_frames=[np.zeros(0, np.int64) for _ in frames],
        features={},
    )
