"""`rtplan eval` for the clock games: every player against a pool, per T0, and the tuning sweeps.

It runs past ~450 lines on purpose: the evaluation's cells, and the two tuning sweeps that choose
per T0 on tuning openings (midpeak's parameter, the clock-aware bar's fixed budget), share one
cell format, one pool and one resumable loop; split apart, the sweep would need a second copy.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from rtplan import games
from rtplan.gate.clock.heuristics import (
    BAR_RULES,
    MIDPEAK_CENTRE,
    MIDPEAK_WIDTH,
    ClockOptions,
    midpeak_grid,
)
from rtplan.gate.clock.players import (
    ClockPlayer,
    baseline_players,
    fixed_players,
    gate_player,
    load_midpeak_table,
    midpeak_player,
    multiplex,
    pool_players,
    read_bar,
    write_midpeak_table,
)
from rtplan.gate.committed.choosers import check_gate_name
from rtplan.gate.evaluation.clock_report import (
    CLOCK_EVAL,
    clock_bar_file,
    option_text,
    write_clock_bar,
    write_summary,
)
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.layout import results_root
from rtplan.planner.episodes import Episodes, seeds_of
from rtplan.planner.matches import EVAL_OPENING_PLIES, play_match, unique_games
from rtplan.planner.options import Planner
from rtplan.planner.store import load_planner

__all__ = [
    "OFF_GRID_CLOCKS",
    "ROWS_PER_CALL",
    "T0S",
    "best_per_t0",
    "cell_file",
    "pick_fixed",
    "run_clock_eval",
    "sweep_file",
    "sweep_scores",
    "tune_fixed",
    "tune_midpeak",
]

#: The clocks every clock-game condition is evaluated at (the paper's T, in ticks).
T0S = (300, 1200, 2300, 3500, 4100)
#: Clocks off the pre-registered five that `--clocks` plays by default: between the gate's
#: training clocks (`gate.clock.config.TRAIN_CLOCKS`), and one past the longest. A gate that
#: only interpolates T0 shows it here. Their cells sit in `clocks_folder(split)`, apart.
OFF_GRID_CLOCKS = (450, 1500, 2600, 3800, 5200, 7000)
#: Openings per `play_match` call (several conditions share a call, `multiplex`): a batch of
#: twice this many games keeps the runner's option executables to 4 x 9 (memory maps).
ROWS_PER_CALL = 128


def cell_file(
    root: str | os.PathLike, game_id: str, split: str, player: str, opponent: str, t0: int
) -> Path:
    """`<root>/<game>/clock-eval/<split>/<player>/<opponent>-T<t0>.json`: one cell's games
    (`split`: the cells' folder, `run_clock_eval`'s `folder`)."""
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
    folder: str | None = None,
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
        folder: the cells' folder under `clock-eval/` and their tables' prefix (default
            `split`; clocks off the pre-registered five: `clock_report.clocks_folder(split)`,
            so they never enter the pre-registered tables).
        log: progress lines.

    Returns:
        The files written or kept.
    """
    if games_per_cell < 2 or games_per_cell % 2:
        raise ValueError(f"games per cell must be even and >= 2, got {games_per_cell}")
    planner_file, planner, params = _load(game_id, planner_file)
    opts = ClockOptions.of(planner)
    tuned = load_midpeak_table(game_id)
    root = results_root(out)
    # The bar's rules at any clock (`bar-nearest`, `bar-uncertainty`), once it is tuned.
    bar_path = clock_bar_file(root, game_id)
    bar = read_bar(bar_path) if bar_path.exists() else None
    everyone = baseline_players(opts, tuned=tuned, bar=bar)
    check_gate_name(gate_name)
    if gate_file is not None:
        everyone[gate_name] = gate_player(gate_file, planner, params)
    pool = pool_players(opts)
    # The bar's rules (`BAR_RULES`) play only when asked: the pre-registered conditions stay.
    names = list(players or [n for n in everyone if n not in BAR_RULES])
    opp_names = list(opponents or pool)
    for n in names:
        if n in BAR_RULES and bar is None:
            raise ValueError(f"{n} plays the clock-aware bar: tune it first (--tune-fixed)")
        if n not in everyone:
            raise ValueError(f"unknown player {n!r}: choose from {sorted(everyone)}")
    for n in opp_names:
        if n not in pool:
            raise ValueError(f"unknown opponent {n!r}: choose from {sorted(pool)}")
    seeds = seeds_of(split, games_per_cell // 2)
    folder = folder or split
    sha = file_sha256(planner_file)
    gate_sha = file_sha256(gate_file) if gate_file else None
    base = {
        "game": game_id,
        "split": split,
        "seeds": seeds.tolist(),
        "planner_checkpoint": ckpt.recorded_path(planner_file),
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
        for name in BAR_RULES & set(ident):  # a re-tuned bar replays their cells
            ident[name]["bar"] = {str(t): k for t, k in sorted(bar.items())}
        for opp in opp_names:
            todo = []
            for name in names:
                path = cell_file(root, game_id, folder, name, opp, t0)
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
                path = cell_file(root, game_id, folder, name, opp, t0)
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
    write_summary(root, game_id, folder)
    return written


def sweep_file(root: str | os.PathLike, game_id: str, family: str) -> Path:
    """`<root>/<game>/clock-eval/<family>-sweep.csv`: a per-T0 sweep's rows (`tune_midpeak`:
    midpeak, `tune_fixed`: fixed)."""
    return Path(root) / game_id / CLOCK_EVAL / f"{family}-sweep.csv"


def _sweep_fields(keys: Sequence[str]) -> tuple[str, ...]:
    return ("t0", *keys, "opponent", "games", "score", "unique_games", "unique_score", "seconds")


def _candidate(row: dict, keys: Sequence[str], like: tuple) -> tuple:
    """A sweep row's candidate, its key columns parsed as the candidates' own types."""
    return tuple(type(v)(row[k]) for k, v in zip(keys, like, strict=True))


def _sweep(
    planner: Planner,
    params,
    players: Mapping[tuple, ClockPlayer],
    keys: Sequence[str],
    *,
    path: Path,
    split: str,
    games_per_cell: int,
    t0s: Sequence[int],
    opponents: Sequence[str] | None,
    log: Callable[[str], None],
) -> list[str]:
    """Plays every candidate of `players` (key values -> player, in tie-break order) against
    every opponent of the pool at every T0 on the `split` openings, in batched calls on the
    same openings, and appends one row per (T0, candidate, opponent) to `path` as soon as it is
    played; rows already there are skipped (resumable). Never plays the evaluation openings.

    Returns:
        The opponents' names.
    """
    if split == "eval":
        raise ValueError("a per-T0 choice is tuned on tuning (or holdout) openings, never eval")
    if games_per_cell < 2 or games_per_cell % 2:
        raise ValueError(f"games per cell must be even and >= 2, got {games_per_cell}")
    pool = pool_players(ClockOptions.of(planner))
    opp_names = list(opponents or pool)
    for n in opp_names:
        if n not in pool:
            raise ValueError(f"unknown opponent {n!r}: choose from {sorted(pool)}")
    like = next(iter(players))
    seeds = seeds_of(split, games_per_cell // 2)
    done = set()
    if path.exists():
        with path.open() as f:
            for r in csv.DictReader(f):
                if int(r["games"]) == games_per_cell:
                    done.add((int(r["t0"]), _candidate(r, keys, like), r["opponent"]))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            csv.writer(f).writerow(_sweep_fields(keys))
    for t0 in t0s:
        for opp in opp_names:
            todo = [g for g in players if (int(t0), g, opp) not in done]
            if not todo:
                continue
            start = time.perf_counter()
            eps = play_cells(planner, params, [players[g] for g in todo], pool[opp], seeds, t0)
            seconds = time.perf_counter() - start
            with path.open("a", newline="") as f:
                w = csv.writer(f)
                for g, ep in zip(todo, eps, strict=True):
                    uniq = unique_games(ep.game_ids)
                    w.writerow([
                        int(t0), *g, opp, len(ep.returns), round(ep.mean, 4), int(uniq.sum()),
                        round(float(ep.returns[uniq].mean()), 4), round(seconds / len(todo), 1),
                    ])  # fmt: skip
            log(f"T0={t0} vs {opp}: {len(todo)} candidates in {seconds:.0f} s")
    return opp_names


def best_per_t0(
    path: str | os.PathLike,
    keys: Sequence[str],
    candidates: Sequence[tuple],
    opponents: Sequence[str],
    games_per_cell: int,
) -> dict[int, tuple]:
    """The per-T0 choice of a sweep (`_sweep`'s file): per T0, the candidate with the best mean
    score over `opponents` in its `games_per_cell`-game rows (ties: the earlier candidate), for
    the T0s where every candidate met every opponent. It reads the sweep's rows only (tuning
    openings), never an evaluation cell.

    Returns:
        T0 -> the chosen candidate's key values.
    """
    scores = sweep_scores(path, keys, candidates, opponents, games_per_cell)
    best = {}
    for t0, by in scores.items():
        if len(by) == len(candidates):
            best[t0] = max((s, -i, g) for i, (g, s) in enumerate(by.items()))[2]
    return best


def sweep_scores(
    path: str | os.PathLike,
    keys: Sequence[str],
    candidates: Sequence[tuple],
    opponents: Sequence[str],
    games_per_cell: int,
) -> dict[int, dict[tuple, float]]:
    """T0 -> candidate -> its mean score over `opponents` (`games_per_cell`-game rows of the
    sweep at `path`), for the candidates that met every opponent, in `candidates`' order."""
    raw: dict[tuple[int, tuple], dict[str, float]] = {}
    with Path(path).open() as f:
        for r in csv.DictReader(f):
            if int(r["games"]) != games_per_cell:
                continue
            key = (int(r["t0"]), _candidate(r, keys, candidates[0]))
            raw.setdefault(key, {})[r["opponent"]] = float(r["score"])
    out: dict[int, dict[tuple, float]] = {}
    for t0 in sorted({t for t, _ in raw}):
        for g in candidates:
            got = raw.get((t0, tuple(g)), {})
            if all(o in got for o in opponents):
                out.setdefault(t0, {})[tuple(g)] = float(np.mean([got[o] for o in opponents]))
    return out


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
    the best per T0 (`best_per_t0`: mean score over the pool; ties: the earlier grid point) and
    writes the table the midpeak player loads (`clock_players.midpeak_file`).

    Every (T0, opponent) plays the whole grid in batched calls on the same openings; each
    (T0, centre, width, opponent) row is appended to `results/<game>/clock-eval/
    midpeak-sweep.csv` as soon as it is played, and rows already there are skipped (resumable).

    Returns:
        T0 -> (centre, width) of the T0s whose every cell is played.
    """
    planner_file, planner, params = _load(game_id, planner_file)
    opts = ClockOptions.of(planner)
    grid = tuple(grid or midpeak_grid())
    root = results_root(out)
    path = sweep_file(root, game_id, "midpeak")
    players = {shape: midpeak_player(opts, *shape) for shape in grid}
    opp_names = _sweep(
        planner, params, players, _MIDPEAK_KEYS, path=path, split=split,
        games_per_cell=games_per_cell, t0s=t0s, opponents=opponents, log=log,
    )  # fmt: skip
    best = best_per_t0(path, _MIDPEAK_KEYS, grid, opp_names, games_per_cell)
    if best:
        write_midpeak_table(
            game_id,
            best,
            {
                "game": game_id,
                "tuned_on": split,
                "openings": games_per_cell // 2,
                "games_per_opponent": games_per_cell,
                "opponents": opp_names,
                "grid": [list(g) for g in grid],
                "planner_sha256": file_sha256(planner_file),
                "sweep": _shown(path, root),
            },
            root=table_root,
        )
        log(f"tuned midpeak shapes (T0: centre, width): {best}")
    return best


#: The key columns of midpeak's sweep and of the fixed budgets'.
_MIDPEAK_KEYS = ("centre", "width")
_FIXED_KEYS = ("k",)


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root.parent) if root.is_absolute() else path)


def tune_fixed(
    game_id: str,
    *,
    split: str = "tuning",
    games_per_cell: int = 100,
    t0s: Sequence[int] = T0S,
    opponents: Sequence[str] | None = None,
    planner_file: str | None = None,
    out: str | os.PathLike | None = None,
    log: Callable[[str], None] = print,
) -> dict[int, str]:
    """The clock-aware bar's choice: every fixed budget (always-k) against the pool per T0 on
    the tuning openings, through midpeak's sweep (`_sweep`, rows in `results/<game>/
    clock-eval/fixed-sweep.csv`, resumable), then `pick_fixed`.

    Returns:
        T0 -> the chosen fixed budget's condition name (`k<k>`), for the T0s fully played.
    """
    planner_file, planner, params = _load(game_id, planner_file)
    opts = ClockOptions.of(planner)
    root = results_root(out)
    fixed = fixed_players(opts)
    players = {(k,): fixed[f"k{k}"] for k in opts.budgets}
    opp_names = _sweep(
        planner, params, players, _FIXED_KEYS, path=sweep_file(root, game_id, "fixed"),
        split=split, games_per_cell=games_per_cell, t0s=t0s, opponents=opponents, log=log,
    )  # fmt: skip
    picks = pick_fixed(
        root, game_id, budgets=opts.budgets, opponents=opp_names, games_per_cell=games_per_cell,
        split=split, planner_sha256=file_sha256(planner_file),
    )  # fmt: skip
    log(f"the clock-aware bar (T0: fixed budget chosen on {split} openings): {picks}")
    return picks


def pick_fixed(
    root: str | os.PathLike,
    game_id: str,
    *,
    budgets: Sequence[int],
    opponents: Sequence[str],
    games_per_cell: int,
    split: str = "tuning",
    planner_sha256: str | None = None,
) -> dict[int, str]:
    """Picks the fixed budget per T0 from `fixed-sweep.csv` alone (`best_per_t0`: the best mean
    over `opponents`; ties: the smaller budget) and writes the clock-aware bar's table
    (`clock_report.write_clock_bar`) with the tuning scores and the openings they came from,
    which the report checks against the cells it composes the bar from.

    Returns:
        T0 -> `k<k>`.
    """
    root = Path(root)
    path = sweep_file(root, game_id, "fixed")
    candidates = [(int(k),) for k in budgets]
    scores = sweep_scores(path, _FIXED_KEYS, candidates, opponents, games_per_cell)
    best = best_per_t0(path, _FIXED_KEYS, candidates, opponents, games_per_cell)
    picks = {t0: f"k{k}" for t0, (k,) in best.items()}
    if picks:
        write_clock_bar(
            root,
            game_id,
            picks,
            {
                "game": game_id,
                "tuned_on": split,
                "seeds": seeds_of(split, games_per_cell // 2).tolist(),
                "games_per_opponent": games_per_cell,
                "opponents": list(opponents),
                "budgets": [int(k) for k in budgets],
                "planner_sha256": planner_sha256,
                "sweep": _shown(path, root),
                "tuning_scores": {
                    str(t0): {f"k{k}": round(s, 4) for (k,), s in by.items()}
                    for t0, by in scores.items()
                    if t0 in best
                },
            },
        )
    return picks
