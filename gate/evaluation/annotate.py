"""Clock-evaluation games where the gate spent big, picked from their cells and re-played.

A pick reads only the gate's options in a cell, never its scores: a game's spend is the gate's
most expensive move, and of those the largest share of its remaining clock (`biggest_spend`).
The game is re-played in-process through `play_match` (the evaluation's own path, deterministic
from its seed) with an observer that records every ply, and must equal its cell's record
(score, plies, options, game id). The annotations (the budget, the gate's probabilities over
its options, both clocks, the planner's value, a note on the big spends) are plain data;
`server.annotated` writes them as replay files.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rtplan.gate.clock.gate import clock_gate_player, load_clock_gate
from rtplan.gate.clock.heuristics import ClockOptions
from rtplan.gate.clock.players import pool_players
from rtplan.gate.evaluation.clock import cell_file
from rtplan.gate.evaluation.clock_report import CLOCK_EVAL, clock_curve, option_text
from rtplan.gate.files import file_sha256
from rtplan.planner.matches import EVAL_OPENING_PLIES, MatchPly, match_opening, play_match
from rtplan.planner.options import Planner

__all__ = [
    "BIG_SPEND",
    "GAMES",
    "PLAYER",
    "AnnotatedGame",
    "AnnotatedMove",
    "CellMismatch",
    "Pick",
    "biggest_spend",
    "games_folder",
    "pick_games",
    "replay_pick",
]

#: The folder of the annotated games under `results/<game>/clock-eval/`.
GAMES = "games"
#: The evaluated player whose games are picked.
PLAYER = "gate"
#: A gate move that spends at least this share of its remaining clock gets a note.
BIG_SPEND = 0.25


class CellMismatch(ValueError):
    """A re-played game differs from the game its cell recorded."""


def games_folder(root: str | os.PathLike, game_id: str) -> Path:
    """`<root>/<game>/clock-eval/games/`: the annotated games of a game."""
    return Path(root) / game_id / CLOCK_EVAL / GAMES


def biggest_spend(options: np.ndarray, costs: Sequence[int], t0: int) -> tuple[float, int, int]:
    """The player's biggest spend in one game: its most expensive move (the most simulations),
    and of those the one that took the largest share of its remaining clock (then the earlier).

    Args:
        options: `[M]` the player's option per move (0 policy-only, i budget i, -1 random).
        costs: `[n + 1]` ticks of each option (0 first).
        t0: the clock at the start.

    Returns:
        (its cost's share of the clock left before it, in [0, 1]; the move's index among the
        player's moves; its cost in ticks); (0, -1, 0) when no move cost anything.
    """
    options = np.asarray(options, np.int64)
    left = clock_curve(options, costs, t0)
    cost = np.where(options > 0, np.asarray(costs)[np.clip(options, 0, None)], 0)
    # An empty clock charges nothing (`games.clock`): such a move spent nothing.
    cost = np.where(left > 0, cost, 0)
    if not cost.any():
        return 0.0, -1, 0
    share = np.minimum(cost / np.maximum(left, 1), 1.0)
    best = min(range(len(options)), key=lambda m: (-cost[m], -share[m], m))
    return float(share[best]), int(best), int(cost[best])


@dataclasses.dataclass(frozen=True)
class Pick:
    """One game of a cell, picked by the gate's spend."""

    cell: str  # the cell file, relative to the results root
    index: int  # the game's index in the cell (first the seeds with the gate first)
    share: float  # its biggest spend's share of the gate's clock left before it
    move: int  # that move's index among the gate's moves
    cost: int  # that move's ticks (simulations)


def _cells(root: Path, game_id: str, split: str, t0s: Sequence[int] | None) -> list[Path]:
    folder = cell_file(root, game_id, split, PLAYER, "x", 0).parent
    paths = sorted(folder.glob("*-T*.json"))
    if t0s is not None:
        paths = [p for p in paths if int(p.stem.rsplit("-T", 1)[1]) in set(t0s)]
    return paths


def pick_games(
    root: str | os.PathLike,
    game_id: str,
    *,
    count: int = 3,
    split: str = "eval",
    t0s: Sequence[int] | None = None,
) -> list[Pick]:
    """The `count` games of the gate's cells (at `t0s`, default every T0) with the biggest
    spend (`biggest_spend`: the most ticks on one move, then the largest share of the clock
    left), one per distinct game (game id); ties: cell file, then index. Reads each cell's
    options only, never its scores.

    Raises:
        FileNotFoundError: no gate cell.
    """
    root = Path(root)
    paths = _cells(root, game_id, split, t0s)
    if not paths:
        where = cell_file(root, game_id, split, PLAYER, "<opponent>", 0).parent
        raise FileNotFoundError(f"no cell of the gate in {where} (t0 {t0s or 'any'})")
    ranked = []
    for path in paths:
        cell = json.loads(path.read_text())
        costs = [0, *cell["simulations"]]
        rel = path.relative_to(root).as_posix()
        for i, text in enumerate(cell["options"]):
            opts = np.array([-1 if c == "r" else int(c) for c in text], np.int64)
            share, move, cost = biggest_spend(opts, costs, cell["t0"])
            if cost:
                ranked.append((Pick(rel, i, share, move, cost), cell["game_ids"][i]))
    ranked.sort(key=lambda pg: (-pg[0].cost, -pg[0].share, pg[0].cell, pg[0].index))
    picks, seen = [], set()
    for pick, gid in ranked:
        if gid not in seen:
            picks.append(pick)
            seen.add(gid)
        if len(picks) == count:
            break
    return picks


@dataclasses.dataclass(frozen=True)
class AnnotatedMove:
    """One ply of a re-played game after its opening."""

    frame: int  # the ply's number in the game, counting the opening's moves
    mover: int  # the player id who moved
    action: int
    option: int  # 0 policy-only, i the budget i, -1 a random move
    k: int  # the option's budget (0 policy-only, -1 a random move)
    cost: int  # ticks charged
    clocks_before: tuple[int, int]  # by player id
    clocks_after: tuple[int, int]
    value: float  # the planner's value at the state, for the mover (-1 loses, +1 wins)
    probabilities: tuple[float, ...] | None  # the gate's moves: [n + 1] over its options
    note: str | None  # the gate's big spends: what it spent, and how the value moved
    state: Any  # the state after the move (host arrays)


@dataclasses.dataclass(frozen=True)
class AnnotatedGame:
    """A re-played evaluation game, equal to its cell's record."""

    game: str
    game_params: dict[str, Any]  # the game's settings (the planner's)
    planner_checkpoint: str  # the planner's file as the cell names it
    seed: int
    t0: int
    cell: str  # relative to the results root
    index: int  # in the cell
    gate_player: int  # the gate's player id
    opponent: str  # the pool opponent's name
    budgets: tuple[int, ...]
    opening: tuple[int, ...]  # the opening's random moves (free)
    start: Any  # the state after the opening (host arrays)
    moves: tuple[AnnotatedMove, ...]
    score: float  # the gate's (1 win, 0.5 draw or unfinished, 0 loss)
    finished: bool  # the game ended by its rules (else at the ply cap)
    pick: Pick
    first: bool  # the gate moved first after the opening

    @property
    def title(self) -> str:
        """What the game is, and the note of its biggest spend."""
        order = "first" if self.first else "second"
        what = f"the gate ({order}) vs {self.opponent} at T0 {self.t0}, seed {self.seed}"
        gate_moves = [m for m in self.moves if m.mover == self.gate_player]
        big = gate_moves[self.pick.move].note if 0 <= self.pick.move < len(gate_moves) else None
        return f"{what}: {big}" if big else what


@functools.lru_cache(maxsize=4)
def _start_fn(planner: Planner, opening_plies: int):
    return jax.jit(functools.partial(match_opening, planner.game, opening_plies=opening_plies))


def _gate_step(gate):
    """The gate's greedy step on one state: (carry, `[n + 1]` probabilities over its options)."""

    def step(params, carry, state, out):
        one = jax.tree.map(lambda x: x[None], (carry, state, out))
        carry, _, logits, _, _ = gate.step(params, *one)
        return jax.tree.map(lambda x: x[0], carry), jax.nn.softmax(logits[0])

    return jax.jit(step)


def _host_row(tree, row: int):
    return jax.device_get(jax.tree.map(lambda x: x[row], tree))


def _note(move: AnnotatedMove, next_value: float | None, gate_id: int) -> str:
    left = move.clocks_before[gate_id]
    share = move.cost / max(left, 1)
    swing = (
        f"value {move.value:+.2f} -> {next_value:+.2f} at its next move"
        if next_value is not None
        else f"value {move.value:+.2f}, its last move"
    )
    return f"{move.cost} sims = {share:.0%} of the {left} ticks left; {swing}"


def replay_pick(
    root: str | os.PathLike,
    pick: Pick,
    planner: Planner,
    planner_params,
    gate_file: str | os.PathLike,
    *,
    planner_file: str | os.PathLike | None = None,
    big_spend: float = BIG_SPEND,
    opening_plies: int = EVAL_OPENING_PLIES,
    max_plies: int = 400,
) -> AnnotatedGame:
    """Re-plays a picked game through `play_match` (one seed, both colours, the other colour's
    game discarded) and annotates it.

    Args:
        root: the results root the pick's cell is under.
        pick: the game.
        planner: the evaluation's planner; `planner_params` its parameters.
        gate_file: the clock gate the cell played (its sha256 must be the cell's).
        planner_file: the planner's file, checked against the cell's sha256 when given.
        big_spend: a gate move spending at least this share of its clock gets a note (the
            pick's biggest spend always does).
        opening_plies, max_plies: as the evaluation played (`play_match`).

    Raises:
        CellMismatch: the gate or planner is not the cell's, or the re-played game differs
            from the cell's record (its score, plies, options or game id).
    """
    cell = json.loads((Path(root) / pick.cell).read_text())
    if cell.get("gate_sha256") != file_sha256(gate_file):
        raise CellMismatch(f"{pick.cell} was played by another gate than {gate_file}")
    if planner_file is not None and cell.get("planner_sha256") != file_sha256(planner_file):
        raise CellMismatch(f"{pick.cell} was played by another planner than {planner_file}")
    gate, gate_params, _ = load_clock_gate(gate_file, planner, planner_file=planner_file)
    opts = ClockOptions.of(planner)
    seeds = cell["seeds"]
    first = pick.index < len(seeds)
    seed, t0, g = int(seeds[pick.index % len(seeds)]), int(cell["t0"]), 0 if first else 1
    rows: list[tuple[int, MatchPly]] = []  # (the game's row, the ply)

    def record(ply: MatchPly) -> None:
        row = int(np.flatnonzero(ply.game == g)[0])
        if ply.alive[row]:
            rows.append((row, ply))

    opponent = pool_players(opts)[cell["opponent"]]
    ep = play_match(
        planner,
        planner_params,
        clock_gate_player(gate, gate_params),
        opponent,
        np.array([seed]),
        max_plies=max_plies,
        opening_plies=opening_plies,
        initial_time=t0,
        on_ply=record,
    )
    budgets = np.asarray((0, *opts.budgets))
    index = {int(b): i for i, b in enumerate(budgets)}
    got = {
        "returns": float(ep.returns[g]),
        "plies": int(ep.frames[g]),
        "options": option_text(np.array([index.get(int(k), -1) for k in ep.ks[g]])),
        "game_ids": ep.game_ids[g],
    }
    for name, value in got.items():
        want = cell[name][pick.index]
        if value != want:
            raise CellMismatch(
                f"{pick.cell} game {pick.index} (seed {seed}, the gate "
                f"{'first' if first else 'second'}): re-played {name} {value!r}, the cell "
                f"recorded {want!r}; the evaluation is not deterministic here (another "
                "planner, gate, jax or machine?)"
            )
    opening_state, opening = _start_fn(planner, opening_plies)(np.uint32(seed), np.int32(t0))
    opening = tuple(int(a) for a in np.asarray(opening) if a >= 0)
    start = jax.device_get(opening_state)
    first_row, first_ply = rows[0]
    if not _same(start, _host_row(first_ply.states, first_row)):
        raise CellMismatch(f"seed {seed}: the opening re-played differs from the match's")
    gate_id = int(np.asarray(first_ply.states.current_player)[first_row])
    if not first:
        gate_id = 1 - gate_id
    step = functools.partial(_gate_step(gate), gate_params)
    carry = jax.tree.map(lambda x: x[0], gate.zero_carry(1))
    raw = []
    for row, ply in rows:
        state, out = _host_row(ply.states, row), _host_row(ply.out, row)
        mover = int(state.current_player)
        option = int(ply.options[row])
        probs = None
        if mover == gate_id:
            carry, p = step(carry, state, out)
            probs = tuple(float(x) for x in np.asarray(p))
            if int(np.argmax(probs)) != option:
                raise CellMismatch(
                    f"{pick.cell} game {pick.index}: the gate's re-derived choice at ply "
                    f"{int(state.frame)} is option {int(np.argmax(probs))}, it played {option}"
                )
            carry = carry.replace(last=np.int32(option))
        after = _host_row(ply.next_states, row)
        raw.append(
            AnnotatedMove(
                frame=int(state.frame),
                mover=mover,
                action=int(ply.actions[row]),
                option=option,
                k=int(budgets[option]) if option >= 0 else -1,
                cost=int(ply.costs[row]),
                clocks_before=tuple(int(c) for c in state.inner.clocks),
                clocks_after=tuple(int(c) for c in after.inner.clocks),
                value=float(out.value),
                probabilities=probs,
                note=None,
                state=after,
            )
        )
    gate_moves = [i for i, m in enumerate(raw) if m.mover == gate_id]
    moves = list(raw)
    for j, i in enumerate(gate_moves):
        m = raw[i]
        left = m.clocks_before[gate_id]
        big = left > 0 and m.cost and (m.cost / left >= big_spend or j == pick.move)
        if big:
            nxt = raw[gate_moves[j + 1]].value if j + 1 < len(gate_moves) else None
            moves[i] = dataclasses.replace(m, note=_note(m, nxt, gate_id))
    return AnnotatedGame(
        game=planner.config.game_id,
        game_params=dict(planner.config.game_params),
        planner_checkpoint=str(cell.get("planner_checkpoint")),
        seed=seed,
        t0=t0,
        cell=pick.cell,
        index=pick.index,
        gate_player=gate_id,
        opponent=cell["opponent"],
        budgets=tuple(opts.budgets),
        opening=opening,
        start=start,
        moves=tuple(moves),
        score=got["returns"],
        finished=bool(moves[-1].state.terminated) if moves else False,
        pick=pick,
        first=first,
    )


def _same(a, b) -> bool:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb, strict=True))


def annotate_games(
    game_id: str,
    *,
    planner_file: str | os.PathLike,
    gate_file: str | os.PathLike,
    root: str | os.PathLike,
    count: int = 3,
    split: str = "eval",
    t0s: Sequence[int] | None = None,
    log: Callable[[str], None] = print,
) -> list[AnnotatedGame]:
    """Picks the `count` games of the gate's cells with the biggest spend (`pick_games`) and
    re-plays each (`replay_pick`) with the planner and gate at these files."""
    from rtplan.planner.store import load_planner

    picks = pick_games(root, game_id, count=count, split=split, t0s=t0s)
    cfg, params, _ = load_planner(game_id, str(planner_file))
    planner = Planner(cfg)
    out = []
    for pick in picks:
        log(f"{game_id}: re-playing {pick.cell} game {pick.index} ({pick.share:.0%} spend)")
        out.append(replay_pick(root, pick, planner, params, gate_file, planner_file=planner_file))
    return out
