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

Clock games (`play_match`) draw each opening from its seed the same way and play it twice, once
with each colour.

Bounded compile set: `eval_runner` groups games by k on a doubling ladder of batch sizes (at
most `len(budgets) * (log2(episodes) + 2)` option executables), and `play_match` pads its
games to the same ladder, so a long evaluation stays far under the kernel's default
`vm.max_map_count` (65,530 memory mappings; each XLA:CPU executable holds some).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import games
from harness.stats import standard_error
from planner.actors import where
from planner.batching import GROWTH, SKIP, OptionRunner, bucket_ladder
from planner.options import Future, Planner

__all__ = [
    "EVAL_OPENING_PLIES",
    "EVAL_SEED_BASE",
    "RANDOM",
    "REFLEX",
    "SEED_RANGES",
    "SPLITS",
    "TUNING_SEED_BASE",
    "Chooser",
    "Episodes",
    "always",
    "cycle",
    "eval_runner",
    "play",
    "play_match",
    "play_policy_only",
    "random_k",
    "seeds_of",
    "split_of",
]

TUNING_SEED_BASE = 1_000_000
EVAL_SEED_BASE = 2_000_000
#: Split name -> its seeds (disjoint; `seeds_of` hands out the first n of one).
SEED_RANGES = {
    "train": range(0, TUNING_SEED_BASE),
    "tuning": range(TUNING_SEED_BASE, EVAL_SEED_BASE),
    "eval": range(EVAL_SEED_BASE, 2 * EVAL_SEED_BASE - TUNING_SEED_BASE),
}
#: The evaluation splits -> their first seed.
SPLITS = {"tuning": TUNING_SEED_BASE, "eval": EVAL_SEED_BASE}
#: Clock-game policies besides ("option", k): masked argmax of the raw policy / uniform legal
#: move, both costing no time.
REFLEX = ("reflex", 0)
RANDOM = ("random", 0)
#: Clock-game evaluations start from an even number of random moves, up to this many.
EVAL_OPENING_PLIES = 6

#: `choose(states, alive, t) -> ks`: the budgets of `[B]` decision states (host ints).
Chooser = Callable[[games.State, np.ndarray, int], np.ndarray]


def seeds_of(split: str, episodes: int) -> np.ndarray:
    """The first `episodes` seeds `[episodes]` of an evaluation split ("tuning" or "eval")."""
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
    return jax.jit(where)


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


def _start(game: games.Game, seeds: np.ndarray):
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

    Returns:
        The `Episodes`, in the order of `seeds`.
    """
    game = runner.planner.game
    seeds = np.asarray(seeds)
    n = len(seeds)
    states, keys = _start(game, seeds)
    returns, frames = np.zeros(n), np.zeros(n, np.int64)
    ks, at, feats, acts = [], [], {}, []
    alive = np.ones(n, bool)
    select = _select_fn()
    t = 0
    while alive.any() and (max_decisions is None or t < max_decisions):
        k = np.where(alive, np.asarray(choose(states, alive, t)), SKIP)
        ks.append(k)
        at.append(np.asarray(states.frame))
        if features is not None:
            for name, v in jax.device_get(features(states)).items():
                feats.setdefault(name, []).append(np.asarray(v))
        pair = _split_keys(keys)
        keys, option_keys = pair[:, 0], pair[:, 1]
        out = runner(planner_params, option_keys, states, k, future_params=future_params)
        if record_actions:
            acts.append(np.where(alive[:, None], np.asarray(out.actions), -1))
        returns += np.where(alive, np.asarray(out.reward), 0.0)
        states = select(jnp.asarray(alive), out.next_state, states)
        alive &= ~np.asarray(out.done)
        t += 1
    frames[:] = np.asarray(states.frame)
    ks_arr, at_arr = np.stack(ks, 1), np.stack(at, 1)
    played = ks_arr != SKIP
    per = [played[i] for i in range(n)]
    actions = None
    if record_actions:
        # [E, decisions * max_k], padded with -1 past each option's own k and after the end.
        flat = np.concatenate(acts, 1)
        # An option cut short by the episode's end still lists its k actions: keep the played.
        actions = [row[row >= 0][: frames[i]] for i, row in enumerate(flat)]
    return Episodes(
        seeds=seeds,
        returns=returns,
        frames=frames,
        ks=[ks_arr[i][per[i]] for i in range(n)],
        decision_frames=[at_arr[i][per[i]] for i in range(n)],
        features={name: [np.stack(v, 1)[i][per[i]] for i in range(n)] for name, v in feats.items()},
        actions=actions,
    )


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
    states, _ = _start(game, seeds)
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


def play_match(
    planner: Planner,
    params,
    policy_a: tuple[str, int],
    policy_b: tuple[str, int],
    seeds: np.ndarray,
    *,
    max_plies: int = 400,
    opening_plies: int = EVAL_OPENING_PLIES,
    params_b=None,
) -> Episodes:
    """Clock games: A vs B from each seed's opening, once with each colour (2 games per seed).

    Policies are ("option", k), `REFLEX` or `RANDOM`. Seed s starts from
    `game.init(PRNGKey(s))` and an even number of uniformly random moves in
    [0, `opening_plies`] drawn from `fold_in(PRNGKey(s), 2)` (deterministic players would
    otherwise replay one game per colour); its move keys are split from
    `fold_in(PRNGKey(s), 1)` per ply, so a game does not depend on its batch.

    Args:
        planner: the planner (its game a clock game).
        params: A's network parameters (and B's unless `params_b`).
        policy_a: A's policy.
        policy_b: B's policy.
        seeds: `[S]` seeds, one opening each.
        max_plies: plies before an unfinished game counts as a draw.
        opening_plies: the longest random opening.
        params_b: B's parameters (default `params`).

    Returns:
        `Episodes` of `2S` games (A first on seeds 0..S-1, then A second on the same seeds),
        returns A's score: 1 win, 0.5 draw or unfinished, 0 loss; `ks` A's budget per move.
    """
    seeds = np.asarray(seeds)
    n = len(seeds)
    size = next(s for s in bucket_ladder(n, GROWTH) if s >= n)
    padded = np.concatenate([seeds, np.full(size - n, seeds[0])]).astype(np.uint32)
    run = _match_fn(planner, policy_a, policy_b, max_plies, opening_plies)
    score, plies, moves = jax.device_get(
        run(params, params if params_b is None else params_b, padded)
    )
    score, plies, moves = (np.asarray(x)[:, :n].reshape(-1) for x in (score, plies, moves))
    k_a = policy_a[1] if policy_a[0] == "option" else 0
    return Episodes(
        seeds=np.concatenate([seeds, seeds]),
        returns=score.astype(np.float64),
        frames=plies.astype(np.int64),
        ks=[np.full(m, k_a, np.int64) for m in moves],
        decision_frames=[np.zeros(0, np.int64) for _ in moves],
        features={},
    )


@functools.lru_cache(maxsize=16)
def _match_fn(planner: Planner, policy_a, policy_b, max_plies: int, opening_plies: int):
    """`run(params_a, params_b, seeds [S]) -> [2, S] (score_a, plies, moves_a)`, jitted."""
    game = planner.game

    def act(policy, params, keys, states):
        kind, k = policy
        if kind == "option":
            out = planner.option(params, keys, states, k)
            return out.actions[:, 0], out.cost
        if kind == "reflex":
            return planner.reflex_action(params, states), jnp.zeros_like(states.frame)
        if kind == "random":
            logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
            a = jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)
            return a, jnp.zeros_like(states.frame)
        raise ValueError(f"unknown policy {policy!r}")

    def openings(keys):
        states = jax.vmap(game.init)(keys)
        if opening_plies < 2:
            return states
        open_keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(keys)
        n_keys, move_keys = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k))(open_keys), 1, 0)
        half = opening_plies // 2 + 1
        plies = 2 * jax.vmap(lambda k: jax.random.randint(k, (), 0, half))(n_keys)
        play = functools.partial(games.random_opening, game, max_plies=opening_plies)
        return jax.vmap(play)(states, move_keys, plies)

    def one_colour(params_a, params_b, states, keys, a_first: bool):
        # Even openings: the player to move is still the one who moved first, and every game
        # of the batch has A to move at the same plies, so only the mover's policy is computed.
        # A is whoever moves first (pgx draws that player id per game), or the other one.
        a_id = states.current_player if a_first else 1 - states.current_player
        n = states.frame.shape[0]
        score, moves = jnp.zeros((n,), jnp.float32), jnp.zeros((n,), jnp.int32)

        def cond(carry):
            states, _, _, i, _ = carry
            return (i < max_plies) & ~jnp.all(states.done)

        def body(carry):
            states, score, moves, i, keys = carry
            pair = jax.vmap(lambda k: jax.random.split(k))(keys)
            keys, sub = pair[:, 0], pair[:, 1]
            a_turn = (i % 2 == 0) == a_first
            action, cost = jax.lax.cond(
                a_turn,
                lambda: act(policy_a, params_a, sub, states),
                lambda: act(policy_b, params_b, sub, states),
            )
            running = ~states.done
            nxt = jax.vmap(game.step)(states, action, cost)
            reward_a = jnp.take_along_axis(nxt.inner.rewards, a_id[:, None], 1)[:, 0]
            score = score + jnp.where(running, reward_a, 0.0)
            moves = moves + (running & a_turn)
            return nxt, score, moves, i + 1, keys

        states, score, moves, _, _ = jax.lax.while_loop(
            cond, body, (states, score, moves, jnp.int32(0), keys)
        )
        return score, states.frame, moves

    def run(params_a, params_b, seeds):
        keys = jax.vmap(jax.random.PRNGKey)(seeds)
        states = openings(keys)
        move_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
        halves = [one_colour(params_a, params_b, states, move_keys, f) for f in (True, False)]
        score, frames, moves = (jnp.stack(x) for x in zip(*halves, strict=True))
        # +1 win, -1 loss, 0 draw or unfinished -> expected score in [0, 1].
        return (score + 1.0) / 2.0, frames, moves

    return jax.jit(run)
