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
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import games
from harness.stats import standard_error
from planner.actors import where
from planner.batching import GROWTH, SKIP, OptionRunner, bucket_ladder
from planner.network import NetOutput
from planner.options import Future, Planner

__all__ = [
    "EVAL_OPENING_PLIES",
    "EVAL_SEED_BASE",
    "RANDOM",
    "REFLEX",
    "SEED_RANGES",
    "SPLITS",
    "TUNING_SEED_BASE",
    "RANDOM_MOVE",
    "Chooser",
    "ClockPlayer",
    "Episodes",
    "clock_opening",
    "always",
    "constant_player",
    "cycle",
    "eval_runner",
    "game_id",
    "option_player",
    "play",
    "play_match",
    "play_policy_only",
    "random_k",
    "seeds_of",
    "split_of",
    "unique_games",
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
#: A clock player's option of a uniformly random legal move (cost 0): the weakest opponent.
#: Option 0 is the reflex (policy-only) move, option i >= 1 the planner's budget i.
RANDOM_MOVE = -1
#: Clock-game evaluations start from an even number of random moves, up to this many.
EVAL_OPENING_PLIES = 6

#: `choose(states, alive, t) -> ks`: the budgets of `[B]` decision states (host ints).
Chooser = Callable[[games.State, np.ndarray, int], np.ndarray]


@dataclasses.dataclass(frozen=True)
class ClockPlayer:
    """A clock-game player: which option it plays at each of its own moves (`play_match`).

    Options: 0 the reflex (policy-only, cost 0), i >= 1 the planner's budget `budgets[i - 1]`
    (charged its simulations), `RANDOM_MOVE` a uniformly random legal move (cost 0). A player
    is pure: `choose` is traced once per batch shape, its state lives in the carry.
    """

    #: The condition's name in tables and files (e.g. "k32", "greedy", "gate").
    name: str
    #: `init(B)`: the carry of B games at their start (`()` for a stateless player).
    init: Callable[[int], Any]
    #: `choose(carry, states [B], out, keys [B]) -> (carry, options [B] int32)`: called only at
    #: plies where this player moves, with the planner's `NetOutput` at `states`; the carry of
    #: a finished game is never read again.
    choose: Callable[[Any, games.State, NetOutput, jax.Array], tuple[Any, jax.Array]]


def constant_player(name: str, option: int) -> ClockPlayer:
    """A stateless player that plays `option` at every move (no fallback when its clock is
    short: the game's own rule applies, a reflex move for free on an empty clock)."""
    return _constant_player(name, int(option))


@functools.lru_cache(maxsize=32)
def _constant_player(name: str, option: int) -> ClockPlayer:
    # Cached so a training loop's evaluations reuse one player (and its compiled choose).
    def choose(carry, states, out, keys):
        return carry, jnp.full(states.frame.shape, option, jnp.int32)

    return ClockPlayer(name=name, init=lambda batch: (), choose=choose)


def option_player(planner: Planner, k: int) -> ClockPlayer:
    """Budget k at every move, named `k<k>`."""
    return constant_player(f"k{k}", planner.config.budgets.index(k) + 1)


#: The policy-only player (masked argmax of the raw policy, free) and the random-move player.
REFLEX = constant_player("policy-only", 0)
RANDOM = constant_player("random-move", RANDOM_MOVE)


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
    clocks: np.ndarray | None = None  # [E, 2] clock games: A's and B's ticks left at the end
    game_ids: list[str] | None = None  # clock games: each game's identity (`game_id`)

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


def clock_opening(
    game: games.Game, key: jax.Array, max_plies: int, state: games.State | None = None
) -> games.State:
    """The clock games' random openings, one recipe for evaluation and gate training: from
    `state` (default `game.init(key)`), an even number in [0, `max_plies`] of uniformly random
    moves drawn from `fold_in(key, 2)` (even, so the player who moved first moves next)."""
    state = game.init(key) if state is None else state
    if max_plies < 2:
        return state
    n_key, move_key = jax.random.split(jax.random.fold_in(key, 2))
    plies = 2 * jax.random.randint(n_key, (), 0, max_plies // 2 + 1)
    return games.random_opening(game, state, move_key, plies, max_plies=max_plies)


def play_match(
    planner: Planner,
    params,
    player_a: ClockPlayer,
    player_b: ClockPlayer,
    seeds: np.ndarray,
    *,
    max_plies: int = 400,
    opening_plies: int = EVAL_OPENING_PLIES,
    initial_time: int | None = None,
) -> Episodes:
    """Clock games: A vs B from each seed's opening, once with each colour (2 games per seed).

    Seed s starts from `game.init(PRNGKey(s))` (both clocks at `initial_time`) and an even
    number of uniformly random moves in [0, `opening_plies`] drawn from `fold_in(PRNGKey(s), 2)`
    (free; deterministic players would otherwise replay one game per colour); its move keys
    are split from `fold_in(PRNGKey(s), 1)` per ply, so a game does not depend on its batch and
    every player meets the same openings (paired conditions).

    Each ply the mover's `ClockPlayer` picks an option from its carry, the planner's output at
    the state (one network evaluation) and a key; option 0 plays the reflex (masked argmax of
    the raw policy, cost 0), option i runs `planner.option(..., budgets[i - 1])` and charges its
    simulations, `RANDOM_MOVE` plays a uniformly random legal move (cost 0). Only the chosen
    options are computed (`OptionRunner` groups the games by budget). A player's carry changes
    on its own plies only.

    Args:
        planner: the planner (its game a clock game).
        params: the planner's network parameters (both players').
        player_a: the evaluated player A.
        player_b: its opponent B.
        seeds: `[S]` seeds, one opening each.
        max_plies: plies after the opening before an unfinished game counts as a draw.
        opening_plies: the longest random opening.
        initial_time: T0, both clocks' ticks at the start (None: the game's own).

    Returns:
        `Episodes` of `2S` games (A first on seeds 0..S-1, then A second on the same seeds):
        `returns` A's score (1 win, 0.5 draw or unfinished, 0 loss), `frames` the game's plies,
        `ks` A's budget per move (0 policy-only, -1 random move), `decision_frames` the ply of
        each of A's moves, `features["clock"]` A's ticks before each move, `clocks` `[2S, 2]`
        (A's, B's) ticks at the end and `game_ids` a digest of each game's moves.
    """
    game = planner.game
    seeds = np.asarray(seeds)
    n = len(seeds)
    size = next(s for s in bucket_ladder(n, GROWTH) if s >= n)
    padded = np.concatenate([seeds, np.full(size - n, seeds[0])]).astype(np.uint32)
    t0 = game.initial_time if initial_time is None else int(initial_time)
    fns = _match_fns(planner, opening_plies)
    runner = _match_runner(planner, 2 * size)
    budgets = np.asarray((0, *planner.config.budgets))
    states, keys, a_id, start_id = fns.start(padded, t0)
    # Padding games never move; A plays rows [:size] first, rows [size:] second.
    alive = np.concatenate([np.arange(size) < n] * 2) & ~np.asarray(states.done)
    carries = {(p, h): pl.init(size) for p, pl in enumerate((player_a, player_b)) for h in (0, 1)}
    players = (player_a, player_b)
    score = np.zeros(2 * size)
    a_id_h = np.asarray(a_id)
    log_opt, log_ply, log_clock, log_act, log_mover = [], [], [], [], []
    i = 0
    while alive.any() and i < max_plies:
        keys, sub, choice_keys = fns.split(keys)
        out = fns.evaluate(params, states)
        opts = []
        for h in (0, 1):
            # Half 0 has A to move on even plies, half 1 on odd ones (even openings).
            p = 0 if (i % 2 == 0) == (h == 0) else 1
            carries[p, h], o = _choose_fn(players[p], h, size)(
                carries[p, h], states, out, choice_keys
            )
            opts.append(o)
        opt = np.concatenate(jax.device_get(opts)).astype(np.int64)
        ks = np.where(alive & (opt > 0), budgets[np.clip(opt, 0, None)], SKIP)
        searched = runner(params, sub, states, ks)
        before = (
            np.asarray(states.frame),
            np.asarray(states.inner.clocks),
            np.asarray(states.current_player),
        )
        states, action, rewards = fns.advance(states, out, searched, opt, sub, alive)
        action, rewards, done = jax.device_get((action, rewards, states.done))
        a_moved = before[2] == a_id_h
        score += np.where(alive, rewards[np.arange(2 * size), a_id_h], 0.0)
        log_opt.append(np.where(alive & a_moved, opt, _NOT_A))
        log_ply.append(before[0])
        log_clock.append(before[1][np.arange(2 * size), a_id_h])
        log_act.append(np.where(alive, action, -1))
        log_mover.append(before[2])
        alive &= ~done
        i += 1
    keep = np.concatenate([np.arange(n), size + np.arange(n)])
    opt, ply, clock = (np.stack(x, 1)[keep] for x in (log_opt, log_ply, log_clock))
    acts, movers = np.stack(log_act, 1)[keep], np.stack(log_mover, 1)[keep]
    mine = [o != _NOT_A for o in opt]
    final_clocks = np.asarray(states.inner.clocks)[keep]
    a_ids = a_id_h[keep]
    rows = np.arange(len(keep))
    return Episodes(
        seeds=np.concatenate([seeds, seeds]),
        returns=(score[keep] + 1.0) / 2.0,  # +1 win, -1 loss, 0 draw or unfinished
        frames=np.asarray(states.frame)[keep].astype(np.int64),
        ks=[np.where(o[m] > 0, budgets[np.clip(o[m], 0, None)], o[m]) for o, m in zip(opt, mine)],
        decision_frames=[p[m].astype(np.int64) for p, m in zip(ply, mine)],
        features={"clock": [c[m] for c, m in zip(clock, mine)]},
        clocks=np.stack([final_clocks[rows, a_ids], final_clocks[rows, 1 - a_ids]], 1),
        game_ids=[
            game_id(start, mv[a >= 0], a[a >= 0])
            for start, mv, a in zip(np.asarray(start_id)[keep], movers, acts)
        ],
    )


#: `play_match`'s marker of a ply that is not one of A's moves.
_NOT_A = -2


def game_id(start: np.ndarray, movers: np.ndarray, actions: np.ndarray) -> str:
    """A game's identity (`Episodes.game_ids`): SHA-1 of the position after its opening
    (`start`, any array) and the (mover, action) sequence played from it. Two games with the
    same id are the same game (the reference counted scores over unique games only)."""
    h = hashlib.sha1(np.ascontiguousarray(start).tobytes())
    h.update(np.stack([movers, actions]).astype(np.int32).tobytes())
    return h.hexdigest()[:16]


def unique_games(ids: Sequence[str]) -> np.ndarray:
    """`[E]` bool: each game is the first with its id (`game_id`): a mask of unique games."""
    seen: set[str] = set()
    first = np.zeros(len(ids), bool)
    for i, g in enumerate(ids):
        first[i] = g not in seen
        seen.add(g)
    return first


@dataclasses.dataclass(frozen=True)
class _MatchFns:
    start: Callable
    split: Callable
    evaluate: Callable
    advance: Callable


@functools.lru_cache(maxsize=8)
def _match_fns(planner: Planner, opening_plies: int) -> _MatchFns:
    """The jitted pieces of `play_match` for one planner (compiled once per batch size)."""
    game = planner.game

    def start(seeds, initial_time):
        keys = jax.vmap(jax.random.PRNGKey)(seeds)
        states = jax.vmap(game.set_initial_time, (0, None))(jax.vmap(game.init)(keys), initial_time)
        states = jax.vmap(lambda k, s: clock_opening(game, k, opening_plies, s))(keys, states)
        move_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
        both = jax.tree.map(lambda x: jnp.concatenate([x, x]), (states, move_keys))
        states, move_keys = both
        n = seeds.shape[0]
        # A is whoever moves first (pgx draws that player id per game), then the other one.
        first = jnp.arange(2 * n) < n
        a_id = jnp.where(first, states.current_player, 1 - states.current_player)
        start_id = jax.vmap(
            lambda s: jnp.concatenate(
                [
                    jnp.ravel(s.inner.board.observation).astype(jnp.float32),
                    s.current_player[None].astype(jnp.float32),
                ]
            )
        )(states)
        return states, move_keys, a_id, start_id

    def split(keys):
        pair = jax.vmap(lambda k: jax.random.split(k))(keys)
        keys, sub = pair[:, 0], pair[:, 1]
        # The player's own draws come from their own stream (not the search's key).
        return keys, sub, jax.vmap(lambda k: jax.random.fold_in(k, 3))(sub)

    def advance(states, out, searched, options, keys, alive):
        legal = states.legal_action_mask
        reflex = planner.masked_argmax(out.logits, legal)
        uniform = jnp.where(legal, 0.0, -jnp.inf)
        rand = jax.vmap(jax.random.categorical)(keys, uniform).astype(jnp.int32)
        free_action = jnp.where(options == RANDOM_MOVE, rand, reflex)
        free = jax.vmap(game.step)(states, free_action, jnp.zeros_like(free_action))
        search = options > 0
        nxt = where(search, searched.next_state, free)
        action = jnp.where(search, searched.actions[:, 0], free_action)
        nxt = where(alive, nxt, states)
        rewards = jnp.where(alive[:, None], nxt.inner.rewards, 0.0)
        return nxt, action, rewards

    return _MatchFns(
        start=jax.jit(start),
        split=jax.jit(split),
        evaluate=jax.jit(planner.evaluate),
        advance=jax.jit(advance),
    )


@functools.lru_cache(maxsize=4)
def _match_runner(planner: Planner, batch: int) -> OptionRunner:
    # Kept per (planner, batch): the training loop evaluates with the same planner every few
    # iterations, and a fresh runner would compile its options again.
    return OptionRunner(planner, max_batch=batch)


@functools.lru_cache(maxsize=64)
def _choose_fn(player: ClockPlayer, half: int, size: int):
    """`player.choose` on rows [half * size, (half + 1) * size) of a match's batch, jitted."""

    def run(carry, states, out, keys):
        rows = functools.partial(jax.tree.map, lambda x: x[half * size : (half + 1) * size])
        carry, option = player.choose(carry, rows(states), rows(out), rows(keys))
        return carry, jnp.asarray(option, jnp.int32)

    return jax.jit(run)
