"""`rtplan eval` for the clock games: every player against a pool, per T0, and midpeak's tuning."""

from __future__ import annotations

import csv
import datetime
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import games
from gate.clock.heuristics import MIDPEAK_CENTRE, MIDPEAK_WIDTH, ClockOptions, midpeak_grid
from gate.clock.players import (
    ClockPlayer,
    baseline_players,
    gate_player,
    load_midpeak_table,
    midpeak_player,
    multiplex,
    pool_players,
    write_midpeak_table,
)
from gate.committed.choosers import check_gate_name
from gate.evaluation.clock_report import CLOCK_EVAL, option_text, write_summary
from gate.files import file_sha256
from harness import checkpoint as ckpt
from harness.layout import results_root
from planner.episodes import Episodes, seeds_of
from planner.matches import EVAL_OPENING_PLIES, play_match, unique_games
from planner.options import Planner
from planner.store import load_planner

__all__ = [
    "ROWS_PER_CALL",
    "T0S",
    "cell_file",
    "run_clock_eval",
    "tune_midpeak",
]

#: The clocks every clock-game condition is evaluated at (the paper's T, in ticks).
T0S = (300, 1200, 2300, 3500, 4100)
#: Openings per `play_match` call (several conditions share a call, `multiplex`): a batch of
#: twice this many games keeps the runner's option executables to 4 x 9 (memory maps).
ROWS_PER_CALL = 128


def cell_file(
    root: str | os.PathLike, game_id: str, split: str, player: str, opponent: str, t0: int
) -> Path:
    """`<root>/<game>/clock-eval/<split>/<player>/<opponent>-T<t0>.json`: one cell's games."""
    return Path(root) / game_id / CLOCK_EVAL / split / player / f"{opponent}-T{t0}.json"


def _record(ep: Episodes, opts: ClockOptions, **fields) -> dict:
    budgets = np.asarray((0, *opts.budgets))
    index = {int(b): i for i, b in enumerate(budgets)}
    return {
        **fields,
        "returns": ep.returns.tolist(),
        "plies": ep.frames.tolist(),
        # The player's option per move; its first move's ply (then every second ply).
        "options": [option_text(np.array([index.get(int(k), -1) for k in ks])) for ks in ep.ks],
        "first_ply": [int(f[0]) if len(f) else -1 for f in ep.decision_frames],
        "clocks_end": ep.clocks.tolist(),
        "game_ids": ep.game_ids,
    }


def _split_episodes(ep: Episodes, players: int, rows: int) -> list[Episodes]:
    """The games of each multiplexed player: rows i*rows.. of both colour halves."""
    half = len(ep.returns) // 2
    out = []
    for i in range(players):
        idx = np.concatenate([np.arange(i * rows, (i + 1) * rows) + h * half for h in (0, 1)])
        out.append(
            Episodes(
                seeds=ep.seeds[idx],
                returns=ep.returns[idx],
                frames=ep.frames[idx],
                ks=[ep.ks[j] for j in idx],
                decision_frames=[ep.decision_frames[j] for j in idx],
                features={n: [v[j] for j in idx] for n, v in ep.features.items()},
                clocks=ep.clocks[idx],
                game_ids=[ep.game_ids[j] for j in idx],
            )
        )
    return out


def play_cells(
    planner: Planner,
    params,
    players: Sequence[ClockPlayer],
    opponent: ClockPlayer,
    seeds: np.ndarray,
    t0: int,
    *,
    rows_per_call: int = ROWS_PER_CALL,
) -> list[Episodes]:
    """Each of `players` against `opponent` on the same openings `seeds` `[S]` at clock `t0`,
    several players per `play_match` call (their searches batched together).

    Returns:
        Per player, its `Episodes` (2S games: first on the seeds, then second).
    """
    s = len(seeds)
    per_call = max(1, rows_per_call // s)
    out = []
    for i in range(0, len(players), per_call):
        group = list(players[i : i + per_call])
        both = multiplex(group, s) if len(group) > 1 else group[0]
        ep = play_match(
            planner,
            params,
            both,
            opponent,
            np.tile(seeds, len(group)),
            opening_plies=EVAL_OPENING_PLIES,
            initial_time=t0,
        )
        out += _split_episodes(ep, len(group), s) if len(group) > 1 else [ep]
    return out


def _load(game_id: str, planner_file: str | None):
    planner_file = str(ckpt.planner_file(game_id, planner_file))
    cfg, params, _ = load_planner(game_id, planner_file)
    planner = Planner(cfg)
    if planner.kind is not games.Kind.CLOCK:
        raise ValueError(f"{game_id} is not a clock game")
    return planner_file, planner, params


def run_clock_eval(
    game_id: str,
    *,
    split: str = "eval",
    games_per_cell: int = 100,
    t0s: Sequence[int] = T0S,
    players: Sequence[str] | None = None,
    opponents: Sequence[str] | None = None,
    planner_file: str | None = None,
    gate_file: str | None = None,
    gate_name: str = "gate",
    out: str | os.PathLike | None = None,
    force: bool = False,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Plays every evaluated player against every opponent of the pool at every T0 and writes
    one file per cell (`cell_file`); a cell already written for the same seeds and planner is
    kept (resumable) unless `force`. Then writes the summary (`gate.evaluation.clock_report`).

    Args:
        game_id: a clock game.
        split: the seed range of the openings.
        games_per_cell: games per (player, opponent, T0), even: half as many openings, each
            played with both colours.
        t0s: the clocks.
        players: evaluated conditions (default: every baseline, and "gate" with `gate_file`).
        opponents: the pool (default: policy-only, always-k per budget, random).
        planner_file: the planner (default: the shipped one).
        gate_file: a clock gate checkpoint, played as `gate_name` (`clock_players.gate_player`).
        gate_name: the gate's player name: another name keeps a second gate's cells beside
            the first's.
        out: results root (default: the checkout's results/).
        force: replay cells already written.
        command: the command line, kept in each file.
        log: progress lines.

    Returns:
        The files written or kept.
    """
    if games_per_cell < 2 or games_per_cell % 2:
        raise ValueError(f"games per cell must be even and >= 2, got {games_per_cell}")
    planner_file, planner, params = _load(game_id, planner_file)
    opts = ClockOptions.of(planner)
    tuned = load_midpeak_table(game_id)
    everyone = baseline_players(opts, tuned=tuned)
    check_gate_name(gate_name)
    if gate_file is not None:
        everyone[gate_name] = gate_player(gate_file, planner, params)
    pool = pool_players(opts)
    names = list(players or everyone)
    opp_names = list(opponents or pool)
    for n in names:
        if n not in everyone:
            raise ValueError(f"unknown player {n!r}: choose from {sorted(everyone)}")
    for n in opp_names:
        if n not in pool:
            raise ValueError(f"unknown opponent {n!r}: choose from {sorted(pool)}")
    seeds = seeds_of(split, games_per_cell // 2)
    root = results_root(out)
    sha = file_sha256(planner_file)
    gate_sha = file_sha256(gate_file) if gate_file else None
    base = {
        "game": game_id,
        "split": split,
        "seeds": seeds.tolist(),
        "planner_checkpoint": planner_file,
        "planner_sha256": sha,
        "budgets": list(opts.budgets),
        "simulations": list(opts.simulations),
        "command": command,
    }
    written = []
    for t0 in t0s:
        # What else a cell was played with, beside the seeds and planner: the gate's params,
        # midpeak's (centre, width) at this T0 (a re-tuned table replays its cells).
        ident = {name: {"gate_sha256": gate_sha if name == gate_name else None} for name in names}
        if "midpeak" in ident:
            shape = (tuned or {}).get(int(t0), (MIDPEAK_CENTRE, MIDPEAK_WIDTH))
            ident["midpeak"]["midpeak_shape"] = [float(shape[0]), float(shape[1])]
        for opp in opp_names:
            todo = []
            for name in names:
                path = cell_file(root, game_id, split, name, opp, t0)
                if path.exists() and not force:
                    old = json.loads(path.read_text())
                    same = old.get("seeds") == base["seeds"] and old.get("planner_sha256") == sha
                    if same and all(old.get(k) == v for k, v in ident[name].items()):
                        written.append(path)
                        continue
                todo.append(name)
            if not todo:
                log(f"T0={t0} vs {opp}: kept")
                continue
            start = time.perf_counter()
            eps = play_cells(planner, params, [everyone[n] for n in todo], pool[opp], seeds, t0)
            seconds = time.perf_counter() - start
            for name, ep in zip(todo, eps, strict=True):
                rec = _record(
                    ep,
                    opts,
                    **base,
                    player=name,
                    opponent=opp,
                    t0=int(t0),
                    **ident[name],
                    seconds=round(seconds / len(todo), 1),
                    timestamp=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                )
                path = cell_file(root, game_id, split, name, opp, t0)
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".json.tmp")
                tmp.write_text(json.dumps(rec))
                tmp.replace(path)
                written.append(path)
                uniq = unique_games(ep.game_ids)
                log(
                    f"T0={t0} {name} vs {opp}: {ep.mean:.3f} over {len(ep.returns)} games "
                    f"({int(uniq.sum())} unique: {ep.returns[uniq].mean():.3f})"
                )
            log(f"T0={t0} vs {opp}: {len(todo)} players in {seconds:.0f} s")
    write_summary(root, game_id, split)
    return written


def _sweep_file(root: Path, game_id: str) -> Path:
    return root / game_id / CLOCK_EVAL / "midpeak-sweep.csv"


_SWEEP_FIELDS = (
    "t0", "centre", "width", "opponent", "games", "score", "unique_games", "unique_score",
    "seconds",
)  # fmt: skip


def tune_midpeak(
    game_id: str,
    *,
    split: str = "tuning",
    games_per_cell: int = 16,
    t0s: Sequence[int] = T0S,
    grid: Sequence[tuple[float, float]] | None = None,
    opponents: Sequence[str] | None = None,
    planner_file: str | None = None,
    out: str | os.PathLike | None = None,
    table_root: str | os.PathLike | None = None,
    log: Callable[[str], None] = print,
) -> dict[int, tuple[float, float]]:
    """Sweeps midpeak's (centre, width) per T0 against the pool on the tuning openings, keeps
    the best per T0 (mean score over the pool; ties: the earlier grid point) and writes the
    table the midpeak player loads (`clock_players.midpeak_file`).

    Every (T0, opponent) plays the whole grid in batched calls on the same openings; each
    (T0, centre, width, opponent) row is appended to `results/<game>/clock-eval/
    midpeak-sweep.csv` as soon as it is played, and rows already there are skipped (resumable).

    Returns:
        T0 -> (centre, width) of the T0s whose every cell is played.
    """
    planner_file, planner, params = _load(game_id, planner_file)
    opts = ClockOptions.of(planner)
    grid = tuple(grid or midpeak_grid())
    pool = pool_players(opts)
    opp_names = list(opponents or pool)
    seeds = seeds_of(split, games_per_cell // 2)
    root = results_root(out)
    path = _sweep_file(root, game_id)
    done = set()
    if path.exists():
        with path.open() as f:
            for r in csv.DictReader(f):
                if int(r["games"]) == games_per_cell:
                    done.add((int(r["t0"]), float(r["centre"]), float(r["width"]), r["opponent"]))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            csv.writer(f).writerow(_SWEEP_FIELDS)
    players = {shape: midpeak_player(opts, *shape) for shape in grid}
    for t0 in t0s:
        for opp in opp_names:
            todo = [g for g in grid if (int(t0), g[0], g[1], opp) not in done]
            if not todo:
                continue
            start = time.perf_counter()
            eps = play_cells(planner, params, [players[g] for g in todo], pool[opp], seeds, t0)
            seconds = time.perf_counter() - start
            with path.open("a", newline="") as f:
                w = csv.writer(f)
                for (c, s), ep in zip(todo, eps, strict=True):
                    uniq = unique_games(ep.game_ids)
                    w.writerow([
                        int(t0), c, s, opp, len(ep.returns), round(ep.mean, 4), int(uniq.sum()),
                        round(float(ep.returns[uniq].mean()), 4), round(seconds / len(todo), 1),
                    ])  # fmt: skip
            log(
                f"T0={t0} vs {opp}: {len(todo)} shapes in {seconds:.0f} s",
            )
    best = _best_shapes(path, grid, opp_names, games_per_cell)
    if best:
        write_midpeak_table(
            game_id,
            best,
            {
                "game": game_id,
                "tuned_on": split,
                "openings": int(len(seeds)),
                "games_per_opponent": games_per_cell,
                "opponents": opp_names,
                "grid": [list(g) for g in grid],
                "planner_sha256": file_sha256(planner_file),
                "sweep": str(path.relative_to(root.parent) if root.is_absolute() else path),
            },
            root=table_root,
        )
        log(f"tuned midpeak shapes (T0: centre, width): {best}")
    return best


def _best_shapes(path: Path, grid, opponents, games_per_cell) -> dict[int, tuple[float, float]]:
    scores: dict[tuple[int, float, float], dict[str, float]] = {}
    with path.open() as f:
        for r in csv.DictReader(f):
            if int(r["games"]) != games_per_cell:
                continue
            key = (int(r["t0"]), float(r["centre"]), float(r["width"]))
            scores.setdefault(key, {})[r["opponent"]] = float(r["score"])
    best = {}
    for t0 in sorted({k[0] for k in scores}):
        full = [
            (np.mean([scores[(t0, *g)][o] for o in opponents]), -i, g)
            for i, g in enumerate(grid)
            if all(o in scores.get((t0, *g), {}) for o in opponents)
        ]
        if len(full) == len(grid):
            best[t0] = max(full)[2]
    return best
