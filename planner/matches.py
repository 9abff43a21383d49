"""Clock-game matches: two `ClockPlayer`s from the evaluation seeds' openings, colours swapped.

Every clock-game evaluation (`rtplan eval`, calibration, the gate trainer's in-training matches,
bench) plays through `play_match`: per ply the mover's player picks an option (0 the reflex,
i >= 1 the planner's budget i, `RANDOM_MOVE` a random legal move) from its carry, the planner's
output and a key, and only the chosen options are computed. Seeds follow the one seed policy of
`planner.episodes`; openings come from `clock_opening`. `play_on` goes on from given positions
(the counterfactual branches); both run one ply loop, `_plies`.

It runs past ~450 lines because the clock-game match is one piece: its players, openings, ply
loop and jitted steps share their batch layout (A's rows first, the move-key splits), and a
split would spread that layout over several files.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rtplan import games
from rtplan.planner.batching import GROWTH, SKIP, OptionRunner, bucket_ladder
from rtplan.planner.episodes import Episodes
from rtplan.planner.network import NetOutput
from rtplan.planner.options import Planner

__all__ = [
    "EVAL_OPENING_PLIES",
    "RANDOM",
    "RANDOM_MOVE",
    "REFLEX",
    "ClockPlayer",
    "MatchPly",
    "clock_opening",
    "clock_opening_moves",
    "constant_player",
    "game_id",
    "match_opening",
    "match_start",
    "option_player",
    "play_match",
    "play_on",
    "unique_games",
]

#: A clock player's option of a uniformly random legal move (cost 0): the weakest opponent.
#: Option 0 is the reflex (policy-only) move, option i >= 1 the planner's budget i.
RANDOM_MOVE = -1
#: Clock-game evaluations start from an even number of random moves, up to this many.
EVAL_OPENING_PLIES = 6


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


def clock_opening(
    game: games.Game, key: jax.Array, max_plies: int, state: games.State | None = None
) -> games.State:
    """The clock games' random openings, one recipe for evaluation and gate training: from
    `state` (default `game.init(key)`), an even number in [0, `max_plies`] of uniformly random
    moves drawn from `fold_in(key, 2)` (even, so the player who moved first moves next)."""
    return clock_opening_moves(game, key, max_plies, state)[0]


def clock_opening_moves(
    game: games.Game, key: jax.Array, max_plies: int, state: games.State | None = None
) -> tuple[games.State, jax.Array]:
    """`clock_opening`, and its moves: `[max(max_plies, 0)]` int32 actions, -1 past the
    opening (`games.random_opening_moves`)."""
    state = game.init(key) if state is None else state
    if max_plies < 2:
        return state, jnp.full((max(max_plies, 0),), -1, jnp.int32)
    n_key, move_key = jax.random.split(jax.random.fold_in(key, 2))
    plies = 2 * jax.random.randint(n_key, (), 0, max_plies // 2 + 1)
    return games.random_opening_moves(game, state, move_key, plies, max_plies=max_plies)


def match_opening(
    game: games.Game, seed: jax.Array, initial_time: jax.Array, *, opening_plies: int
) -> tuple[games.State, jax.Array]:
    """The position `play_match` starts seed `seed`'s games from: `game.init(PRNGKey(seed))`
    with both clocks at `initial_time`, then `clock_opening` (with its moves,
    `clock_opening_moves`: a replay of the game needs them)."""
    key = jax.random.PRNGKey(seed)
    state = game.set_initial_time(game.init(key), initial_time)
    return clock_opening_moves(game, key, opening_plies, state)


@dataclasses.dataclass(frozen=True)
class MatchPly:
    """One ply of a `play_match` batch, as its `on_ply` observer sees it. Rows: the batch's
    games, `game[r]` the index of row r's game in the returned `Episodes` (-1: padding)."""

    ply: int  # plies played since the opening
    game: np.ndarray  # [R] int the row's game in the returned Episodes, -1 for padding
    alive: np.ndarray  # [R] bool the row's game was running before this ply
    states: games.State  # [R] before the ply
    out: NetOutput  # [R] the planner's output at `states`
    options: np.ndarray  # [R] int the mover's option (0 reflex, i budget i, RANDOM_MOVE)
    actions: np.ndarray  # [R] int the action played, -1 where the game was over
    costs: np.ndarray  # [R] int the ticks the move was charged (its search's simulations)
    next_states: games.State  # [R] after the ply


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
    on_ply: Callable[[MatchPly], None] | None = None,
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
        on_ply: called after each ply with what it played (`MatchPly`), e.g. to record a game
            (`gate.evaluation.annotate`); it changes nothing of the match.

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
    budgets = np.asarray((0, *planner.config.budgets))
    states, keys, a_id, start_id = _start_fn(planner, opening_plies)(padded, t0)
    # Padding games never move (no plies to play); A plays rows [:size] first, rows [size:]
    # second.
    stop = np.where(np.concatenate([np.arange(size) < n] * 2), max_plies, 0)
    carries = {(p, h): pl.init(size) for p, pl in enumerate((player_a, player_b)) for h in (0, 1)}
    players = (player_a, player_b)

    def choose(i, states, out, choice_keys):
        opts = []
        for h in (0, 1):
            # Half 0 has A to move on even plies, half 1 on odd ones (even openings).
            p = 0 if (i % 2 == 0) == (h == 0) else 1
            carries[p, h], o = _choose_fn(players[p], h, size)(
                carries[p, h], states, out, choice_keys
            )
            opts.append(o)
        return np.concatenate(jax.device_get(opts))

    score = np.zeros(2 * size)
    # Row r's game in the returned Episodes (-1: padding).
    keep = np.concatenate([np.arange(n), size + np.arange(n)])
    row_game = np.full(2 * size, -1)
    row_game[keep] = np.arange(2 * n)
    a_id_h = np.asarray(a_id)
    log_opt, log_ply, log_clock, log_act, log_mover = [], [], [], [], []
    runner = _match_runner(planner, 2 * size)
    for step in _plies(planner, params, states, keys, choose, stop, runner):
        alive, states, opt = step.alive, step.states, step.options
        action, rewards = jax.device_get((step.actions, step.rewards))
        if on_ply is not None:
            cost = np.where(alive & (opt > 0), np.asarray(step.searched.cost), 0)
            acted = np.where(alive, action, -1)
            nxt = step.next_states
            on_ply(MatchPly(step.i, row_game, alive, states, step.out, opt, acted, cost, nxt))
        mover = np.asarray(states.current_player)
        score += np.where(alive, rewards[np.arange(2 * size), a_id_h], 0.0)
        log_opt.append(np.where(alive & (mover == a_id_h), opt, _NOT_A))
        log_ply.append(np.asarray(states.frame))
        log_clock.append(np.asarray(states.inner.clocks)[np.arange(2 * size), a_id_h])
        log_act.append(np.where(alive, action, -1))
        log_mover.append(mover)
        states = step.next_states
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


def match_start(
    planner: Planner,
    seeds: np.ndarray,
    initial_time: int | None = None,
    *,
    opening_plies: int = EVAL_OPENING_PLIES,
) -> tuple[games.State, jax.Array]:
    """The positions `play_match` starts seeds `seeds` `[S]` from (`match_opening`, both clocks
    at `initial_time`, None: the game's own) and their move keys, one game per seed (its first
    half: colours do not matter when one policy plays both sides). `play_on` from them plays
    the ply sequence `play_match` would."""
    seeds = np.asarray(seeds).astype(np.uint32)
    t0 = planner.game.initial_time if initial_time is None else int(initial_time)
    states, keys, _, _ = _start_fn(planner, opening_plies)(seeds, t0)
    n = len(seeds)
    return jax.tree.map(lambda x: x[:n], states), keys[:n]


def play_on(
    planner: Planner,
    params,
    states: games.State,
    keys: jax.Array,
    choose: Callable[[int, games.State, NetOutput, jax.Array], Any],
    *,
    max_plies: int,
    until: np.ndarray | None = None,
    runner: OptionRunner | None = None,
) -> tuple[games.State, jax.Array, np.ndarray, np.ndarray]:
    """Plays clock-game states `[R]` on, ply by ply, as `play_match` does (the same per-ply key
    splits of the move keys `keys` `[R]`, the same options and moves), each row's option from
    `choose(i, states, out, choice_keys) -> [R]` at its `i`-th ply from here (0 reflex, j the
    budget j, `RANDOM_MOVE`), until its game ends, `max_plies` plies pass or its own `until`
    `[R]` plies (None: no per-row stop).

    Returns:
        (states `[R]`, move keys `[R]` to go on from them, rewards `[R, 2]` summed per player
        id over the plies played (+1 win, -1 loss, 0 otherwise), plies played `[R]`).
    """
    rows = keys.shape[0]
    stop = np.full(rows, max_plies) if until is None else np.minimum(until, max_plies)
    rewards = np.zeros((rows, 2))
    plies = np.zeros(rows, np.int64)
    runner = runner or _match_runner(planner, rows)
    for step in _plies(planner, params, states, keys, choose, stop, runner):
        states, keys = step.next_states, step.next_keys
        rewards += np.where(step.alive[:, None], np.asarray(step.rewards), 0.0)
        plies += step.alive
    return states, keys, rewards, plies


@dataclasses.dataclass(frozen=True)
class _Ply:
    """One ply of `_plies`: rows `[R]`."""

    i: int  # plies played before this one
    alive: np.ndarray  # [R] bool the row plays this ply
    states: games.State  # [R] before the ply
    out: NetOutput  # [R] the planner's output at `states`
    options: np.ndarray  # [R] int each row's option
    searched: Any  # the `OptionRunner`'s result for the rows that searched
    next_states: games.State  # [R] after the ply (unchanged where not alive)
    next_keys: jax.Array  # [R] the move keys to go on from (unchanged where not alive)
    actions: jax.Array  # [R] the action played (meaningless where not alive)
    rewards: jax.Array  # [R, 2] per player id (0 where not alive)


def _plies(
    planner: Planner,
    params,
    states: games.State,
    keys: jax.Array,
    choose: Callable[[int, games.State, NetOutput, jax.Array], Any],
    stop: np.ndarray,
    runner: OptionRunner,
) -> Iterator[_Ply]:
    """The one clock-game ply loop (`play_match`, `play_on`): yields each ply played from
    `states` `[R]` with move keys `keys` `[R]`, each row's option from `choose(i, states, out,
    choice_keys) -> [R]`, until every row's game is over or has played its `stop` `[R]` plies.
    A row that stopped keeps its keys, so a later loop goes on as if it had not stopped."""
    fns = _ply_fns(planner)
    budgets = np.asarray((0, *planner.config.budgets))
    alive = ~np.asarray(states.done)
    i = 0
    while True:
        alive &= i < stop
        if not alive.any():
            return
        nkeys, sub, choice_keys = fns.split(keys)
        out = fns.evaluate(params, states)
        opt = np.asarray(jax.device_get(choose(i, states, out, choice_keys))).astype(np.int64)
        ks = np.where(alive & (opt > 0), budgets[np.clip(opt, 0, None)], SKIP)
        searched = runner(params, sub, states, ks)
        nxt, action, rewards = fns.advance(states, out, searched, opt, sub, alive)
        keys = jnp.where(jnp.asarray(alive)[:, None], nkeys, keys)
        yield _Ply(i, alive.copy(), states, out, opt, searched, nxt, keys, action, rewards)
        states = nxt
        alive &= ~np.asarray(nxt.done)
        i += 1


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


@functools.lru_cache(maxsize=8)
def _start_fn(planner: Planner, opening_plies: int) -> Callable:
    """`play_match`'s start, jitted: seeds `[S]`, T0 -> (states `[2S]` (each opening twice),
    move keys `[2S]`, A's player id `[2S]`, each start position's identity `[2S, F]`)."""
    game = planner.game

    def start(seeds, initial_time):
        keys = jax.vmap(jax.random.PRNGKey)(seeds)
        opening = functools.partial(match_opening, game, opening_plies=opening_plies)
        states, _ = jax.vmap(opening, (0, None))(seeds, initial_time)
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

    return jax.jit(start)


@dataclasses.dataclass(frozen=True)
class _PlyFns:
    split: Callable
    evaluate: Callable
    advance: Callable


@functools.lru_cache(maxsize=8)
def _ply_fns(planner: Planner) -> _PlyFns:
    """The jitted pieces of a ply of `_plies` for one planner (compiled once per batch size)."""
    game = planner.game

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
        nxt = games.tree_where(search, searched.next_state, free)
        action = jnp.where(search, searched.actions[:, 0], free_action)
        nxt = games.tree_where(alive, nxt, states)
        rewards = jnp.where(alive[:, None], nxt.inner.rewards, 0.0)
        return nxt, action, rewards

    return _PlyFns(
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
