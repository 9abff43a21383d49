"""Paired evaluation of budget policies (the gate and its baselines) on fixed seed ranges."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import games
from gate.policy import Gate
from planner.batching import SKIP, OptionRunner
from planner.evaluate import standard_error
from planner.options import Planner

__all__ = [
    "ABLATIONS",
    "EVAL_SEED_BASE",
    "POLICY_ONLY",
    "SPLITS",
    "TUNING_SEED_BASE",
    "Episodes",
    "always",
    "condition_names",
    "cycle",
    "gate_chooser",
    "paired",
    "play",
    "play_policy_only",
    "random_k",
    "seeds_of",
]

#: Seed ranges. Training games come from splits of `PRNGKey(train seed)`; model selection plays
#: `TUNING_SEED_BASE + i`; reported numbers play `EVAL_SEED_BASE + i`, never looked at while
#: training or tuning. Episode i of every condition plays the same seed (paired comparisons).
TUNING_SEED_BASE = 1_000_000
EVAL_SEED_BASE = 2_000_000
SPLITS = {"tuning": TUNING_SEED_BASE, "eval": EVAL_SEED_BASE}
#: The reflex every frame, no search (k is recorded as 0).
POLICY_ONLY = "policy-only"
#: Gate input ablations at evaluation: condition name -> the `GateInputs` field zeroed.
ABLATIONS = {
    "gate-no-board": "obs",
    "gate-no-time": "time",
    "gate-no-features": "features",
    "gate-no-value": "value",
}

#: `choose(states, alive, t) -> ks`: the budgets of `[B]` decision states (host ints).
Chooser = Callable[[games.State, np.ndarray, int], np.ndarray]


def seeds_of(split: str, episodes: int) -> np.ndarray:
    """The first `episodes` seeds of a split ("tuning" or "eval")."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {sorted(SPLITS)}")
    return SPLITS[split] + np.arange(episodes)


def condition_names(budgets: Sequence[int], *, gate: bool, ablations: bool = False) -> list[str]:
    """Every condition of an evaluation: the gate (and its ablations), always-k, random k,
    policy-only."""
    names = ["gate"] if gate else []
    if gate and ablations:
        names += list(ABLATIONS)
    return [*names, *(f"k{k}" for k in budgets), "random", POLICY_ONLY]


@dataclasses.dataclass
class Episodes:
    """What one condition did on each seed."""

    seeds: np.ndarray  # [E]
    returns: np.ndarray  # [E] undiscounted return over the full episode
    frames: np.ndarray  # [E] frames played
    ks: list[np.ndarray]  # per episode: the budget of each decision (0: policy-only)
    decision_frames: list[np.ndarray]  # per episode: the frame of each decision
    features: dict[str, list[np.ndarray]]  # per feature, per episode: its value at decisions
    actions: list[np.ndarray] | None = None  # per episode: the action of every frame (if asked)

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def se(self) -> float:
        return standard_error(self.returns)


def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean, SE) of the per-seed difference a - b (ddof 1)."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    return float(d.mean()), standard_error(d)


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


@functools.partial(jax.jit, static_argnames=("gate", "zero"))
def _greedy_k(gate: Gate, params, planner_params, states: games.State, zero: str | None):
    x = gate.inputs(planner_params, states)
    if zero is not None:
        x = x.replace(**{zero: jnp.zeros_like(getattr(x, zero))})
    logits, _ = gate.apply(params, x)
    return jnp.asarray(gate.budgets)[jnp.argmax(logits, -1)]


def gate_chooser(gate: Gate, params, planner_params, *, zero: str | None = None) -> Chooser:
    """The deployed gate (argmax), optionally with one input field zeroed (an ablation)."""
    if zero is not None and zero not in ABLATIONS.values():
        raise ValueError(f"cannot zero {zero!r}: choose from {sorted(ABLATIONS.values())}")
    return lambda states, alive, t: np.asarray(
        _greedy_k(gate, params, planner_params, states, zero)
    )


@functools.lru_cache(maxsize=8)
def _select_fn():
    def select(alive, new, old):
        def pick(x, y):
            return jnp.where(alive.reshape(alive.shape + (1,) * (x.ndim - 1)), x, y)

        return jax.tree.map(pick, new, old)

    return jax.jit(select)


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
        runner: runs each game's chosen option (grouped by k).
        planner_params: the frozen planner's parameters.
        seeds: `[E]` episode seeds.
        choose: the budget policy.
        max_decisions: stop after this many decisions (None: the game's end or horizon).
        features: optional jitted `states -> {name: [E] array}` recorded at each decision.
        record_actions: also keep the action applied at every frame (reflex and planned).
        future_params: the parameters of the runner's `future` (a runner built with one).
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
