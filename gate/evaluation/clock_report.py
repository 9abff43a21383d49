"""The clock games' tables and figures from `rtplan eval`'s cell files (`gate.evaluation.clock`).

A little past ~450 lines: the tables, the paired differences against the two bars (the best fixed
budget and the clock-aware bar) and the figures read the same cells and pairing, kept together.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rtplan.gate.clock.players import heuristic_names
from rtplan.gate.committed.choosers import is_gate
from rtplan.harness.stats import paired, standard_error
from rtplan.planner.matches import unique_games

__all__ = [
    "CLOCK_BAR",
    "CLOCK_BAR_FILE",
    "CLOCK_EVAL",
    "CLOCKS_SUFFIX",
    "PROFILE_BINS",
    "clock_bar_file",
    "clock_curve",
    "clock_figures",
    "clock_readme_table",
    "clocks_folder",
    "load_cells",
    "load_clock_bar",
    "option_text",
    "summarize_cells",
    "with_clock_bar",
    "write_clock_bar",
    "write_summary",
]

#: The topic folder under `results/<game>/`.
CLOCK_EVAL = "clock-eval"
#: `option_text`'s character of a random move (option -1).
_RANDOM_MOVE_CHAR = "r"

#: Normalised move-number bins of the strategy profile and the clock curves.
PROFILE_BINS = 10
#: The average over T0 in the rows' `t0` column.
MEAN = "mean"
#: The clock-aware bar's condition name: at each T0 the fixed budget chosen on tuning openings
#: (`gate.evaluation.clock.tune_fixed`), composed from that budget's own cells at the T0.
CLOCK_BAR = "k-per-t0"
#: Its table, `results/<game>/clock-eval/fixed-per-t0.json`: T0 -> the chosen `k<k>`, with
#: the tuning scores and openings it was chosen on.
CLOCK_BAR_FILE = "fixed-per-t0.json"
#: The cells' folder suffix of clocks off the pre-registered five (`rtplan eval --clocks`).
CLOCKS_SUFFIX = "-clocks"


def clocks_folder(split: str) -> str:
    """`<split>-clocks`: the folder (under `clock-eval/`) and table prefix of the cells played
    at clocks off the pre-registered five, kept out of `<split>`'s tables and their mean."""
    return f"{split}{CLOCKS_SUFFIX}"


def clock_bar_file(root: str | os.PathLike, game_id: str) -> Path:
    """`<root>/<game>/clock-eval/fixed-per-t0.json`: the clock-aware bar's table."""
    return Path(root) / game_id / CLOCK_EVAL / CLOCK_BAR_FILE


def write_clock_bar(
    root: str | os.PathLike, game_id: str, picks: dict[int, str], provenance: dict
) -> Path:
    """Writes the clock-aware bar's table: `per_t0` (T0 -> `k<k>`) and how it was chosen
    (`provenance`: at least `seeds`, the tuning openings, and `planner_sha256`)."""
    path = clock_bar_file(root, game_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {**provenance, "per_t0": {str(t0): k for t0, k in sorted(picks.items())}}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def load_clock_bar(root: str | os.PathLike, game_id: str) -> dict | None:
    """The clock-aware bar's table (`write_clock_bar`), or None when none was tuned."""
    path = clock_bar_file(root, game_id)
    return json.loads(path.read_text()) if path.exists() else None


def with_clock_bar(cells: list[dict], table: dict | None, split: str | None = None) -> list[dict]:
    """`cells` plus the clock-aware bar's (`CLOCK_BAR`): at each T0 of `table["per_t0"]` a copy
    of the chosen budget's cells at that T0 (with `picked`), so the bar meets the same openings
    as every player and pairs with them game by game. Only the table's choice is read; the
    cells' scores never choose. The cells of the split the bar was chosen on (`split`, or its
    `--clocks` folder) get no bar: it would be scored on its own tuning openings.

    Raises:
        ValueError: the table was tuned on openings these cells play, or over another planner.
    """
    if not table or (split and split.removesuffix(CLOCKS_SUFFIX) == table.get("tuned_on")):
        return cells
    tuned = {int(s) for s in table.get("seeds", ())}
    sha = table.get("planner_sha256")
    for c in cells:
        if tuned & {int(s) for s in c["seeds"]}:
            raise ValueError(
                f"the clock-aware bar ({CLOCK_BAR_FILE}) was chosen on openings these cells play: "
                "choose it on tuning openings (rtplan eval --tune-fixed)"
            )
        if sha and c.get("planner_sha256") and c["planner_sha256"] != sha:
            raise ValueError(
                f"the clock-aware bar ({CLOCK_BAR_FILE}) was chosen over another planner than "
                "these cells': re-tune it (rtplan eval --tune-fixed)"
            )
    picks = {int(t0): k for t0, k in table["per_t0"].items()}
    bar = [
        {**c, "player": CLOCK_BAR, "picked": c["player"]}
        for c in cells
        if c["player"] == picks.get(c["t0"])
    ]
    return [*(c for c in cells if c["player"] != CLOCK_BAR), *bar]


def option_text(options: np.ndarray) -> str:
    """A game's options per move of the player as one character each (0 policy-only, i the
    budget i, r a random move): compact files."""
    return "".join(_RANDOM_MOVE_CHAR if o < 0 else str(int(o)) for o in options)


def _options_of(text: str) -> np.ndarray:
    return np.array([-1 if c == _RANDOM_MOVE_CHAR else int(c) for c in text], np.int64)


def clock_curve(options: np.ndarray, costs: Sequence[int], t0: int) -> np.ndarray:
    """`[M]` the player's ticks before each of its moves, from its options (no-timeout mode:
    an empty clock pays nothing, a charge is clamped at 0; `games.clock`)."""
    left, out = int(t0), []
    for o in options:
        out.append(left)
        cost = costs[o] if o > 0 else 0
        left = max(left - (cost if left > 0 else 0), 0)
    return np.asarray(out, np.int64)


def load_cells(root: str | os.PathLike, game_id: str, split: str = "eval") -> list[dict]:
    """Every cell file of a game's split (a cells' folder), with `options` as int arrays."""
    folder = Path(root) / game_id / CLOCK_EVAL / split
    cells = []
    for path in sorted(folder.glob("*/*.json")):
        rec = json.loads(path.read_text())
        rec["options"] = [_options_of(s) for s in rec["options"]]
        cells.append(rec)
    return cells


def _is_fixed(name: str) -> bool:
    return name[:1] == "k" and name[1:].isdigit()


def _ordered(cells: list[dict]) -> dict[str, dict[tuple[int, str], dict]]:
    """player -> (t0, opponent) -> cell, checking that every player met the same openings."""
    by: dict[str, dict[tuple[int, str], dict]] = {}
    for c in cells:
        by.setdefault(c["player"], {})[(c["t0"], c["opponent"])] = c
    seeds = {tuple(c["seeds"]) for c in cells}
    if len(seeds) > 1:
        raise ValueError("clock cells played different openings: replay them with --force")
    return by


def _scores(cells: dict[tuple[int, str], dict], keys: list[tuple[int, str]]) -> np.ndarray:
    return np.concatenate([np.asarray(cells[k]["returns"], np.float64) for k in keys])


def summarize_cells(cells: list[dict]) -> tuple[list[dict], list[dict]]:
    """Per-cell rows and per-player rows (per T0 and averaged over T0), with paired
    differences against the best fixed budget and the best heuristic.

    Scores are expected scores (W + D/2)/N over every game; `unique_*` over the unique games
    only (the reference's count). A player's score at a T0 pools its games against every
    opponent (the same number each); averaged over T0 it pools every game, which equals the mean
    of the per-T0 scores. The best fixed budget and the best heuristic are those with the
    highest score averaged over T0 on these games (a selection on the same games, which favours
    the baselines). Only (T0, opponent) cells every player has are compared, among the players
    with cells at every T0 of the split: a player played at some T0s only (a fixed budget
    played where the clock-aware bar needs it, say) does not narrow the others' cells; it has
    a row at each T0 whose every compared cell it has, a mean row only when that is every T0,
    and is never the best fixed budget or heuristic.

    The clock-aware bar (`CLOCK_BAR`, cells from `with_clock_bar`: a fixed budget per T0 chosen
    on tuning openings) does not narrow those cells: it has a row at each T0 whose every compared
    cell it has (`picked`: its budget there) and a mean row when it has them at every T0, and
    every other player's row there carries `minus_clock_bar` and its paired SE.

    Returns:
        (cell rows, player rows).
    """
    by = _ordered(cells)
    bar = by.pop(CLOCK_BAR, None)
    if not by:
        return [], []
    every_t0 = {t for cs in by.values() for t, _ in cs}
    whole = [cs for cs in by.values() if {t for t, _ in cs} == every_t0] or list(by.values())
    common = sorted(set.intersection(*(set(v) for v in whole)))
    t0s = sorted({t for t, _ in common})
    row_at = {
        p: {t for t in t0s if all(k in cs for k in common if k[0] == t)} for p, cs in by.items()
    }
    row_at = {p: {*at, *([MEAN] if at == set(t0s) else [])} for p, at in row_at.items()}
    bar_t0s = [t for t in t0s if bar and all(k in bar for k in common if k[0] == t)]
    if bar_t0s:
        by[CLOCK_BAR] = bar
    bar_at = {*bar_t0s, *([MEAN] if bar_t0s == t0s else [])}
    cell_rows = []
    for player, cs in sorted(by.items()):
        for (t0, opp), c in sorted(cs.items()):
            r = np.asarray(c["returns"], np.float64)
            uniq = unique_games(c["game_ids"])
            opts = np.concatenate(c["options"]) if c["options"] else np.zeros(0)
            cell_rows.append({
                "player": player, "t0": t0, "opponent": opp, "games": len(r),
                "score": float(r.mean()), "se": standard_error(r),
                "unique_games": int(uniq.sum()), "unique_score": float(r[uniq].mean()),
                "mean_option": float(opts.mean()) if len(opts) else None,
                "clock_left": float(np.mean([e[0] for e in c["clocks_end"]])),
                **({"picked": c["picked"]} if "picked" in c else {}),
            })  # fmt: skip

    def mean_score(p: str) -> float:
        return float(_scores(by[p], common).mean())

    fixed = [p for p in by if _is_fixed(p) and MEAN in row_at[p]]
    heur = [p for p in by if p in heuristic_names() and MEAN in row_at[p]]
    best_fixed = max(sorted(fixed), key=mean_score) if fixed else None
    best_heur = max(sorted(heur), key=mean_score) if heur else None
    rows = []
    for player, cs in sorted(by.items()):
        for t0 in [*t0s, MEAN]:
            if t0 not in (bar_at if player == CLOCK_BAR else row_at[player]):
                continue
            keys = [k for k in common if t0 == MEAN or k[0] == t0]
            r = _scores(cs, keys)
            ids = [g for k in keys for g in cs[k]["game_ids"]]
            # Unique games within each cell (a game repeated across cells is another pairing).
            uniq = np.concatenate([unique_games(cs[k]["game_ids"]) for k in keys])
            row = {
                "player": player, "t0": t0, "games": len(r), "score": float(r.mean()),
                "se": standard_error(r), "unique_games": int(uniq.sum()),
                "unique_score": float(r[uniq].mean()), "distinct_games": len(set(ids)),
                "best_fixed": player == best_fixed, "best_heuristic": player == best_heur,
            }  # fmt: skip
            for label, ref in (("fixed", best_fixed), ("heuristic", best_heur)):
                if ref is not None and ref != player:
                    d, se = paired(r, _scores(by[ref], keys))
                    row[f"minus_best_{label}"], row[f"minus_best_{label}_se"] = d, se
                    row[f"best_{label}_name"] = ref
            if player == CLOCK_BAR:
                row["picked"] = "/".join(cs[k]["picked"] for k in keys if k[1] == keys[0][1])
            elif t0 in bar_at:
                d, se = paired(r, _scores(by[CLOCK_BAR], keys))
                row["minus_clock_bar"], row["minus_clock_bar_se"] = d, se
            rows.append(row)
    return cell_rows, rows


def pair_rows(cells: list[dict]) -> list[dict]:
    """Every gate's paired difference against every other player of the cells, per T0 and
    averaged over T0 (`MEAN`), over the (T0, opponent) cells both have, game by game: what a
    pre-registered rule with fixed bars reads (docs/preregistration.md), where
    `summarize_cells` names the best baseline on the same games. The clock-aware bar
    (`CLOCK_BAR`) pairs at the T0s where it has every cell the gate has, and in the mean only
    when it has them all."""
    by = _ordered(cells)
    rows = []
    for player in sorted(p for p in by if is_gate(p)):
        for other in sorted(q for q in by if q != player):
            both = sorted(set(by[player]) & set(by[other]))
            t0s = sorted({t for t, _ in both})
            whole = True
            if other == CLOCK_BAR:
                t0s = [t for t in t0s if all(k in by[other] for k in by[player] if k[0] == t)]
                whole = set(t0s) == {t for t, _ in by[player]}
                both = [k for k in both if k[0] in t0s]
            for t0 in [*t0s, *([MEAN] if whole and t0s else [])]:
                keys = [k for k in both if t0 == MEAN or k[0] == t0]
                d, se = paired(_scores(by[player], keys), _scores(by[other], keys))
                rows.append({
                    "player": player, "versus": other, "t0": t0, "games": sum(
                        len(by[player][k]["returns"]) for k in keys),
                    "diff": d, "se": se, "z": d / se if se > 0 else None,
                })  # fmt: skip
    return rows


def _score(r: dict | None, named: bool = False) -> str:
    if not r:
        return "—"
    return f"{r['score']:.3f} ± {r['se']:.3f}" + (f" ({r['player']})" if named else "")


def _minus(r: dict | None, column: str) -> str:
    if not r or column not in r:
        return "—"
    d, se = r[column], r[f"{column}_se"]
    return f"{d:+.3f} ± {se:.3f} ({d / se:+.1f} SE)" if se > 0 else f"{d:+.3f} ± 0"


def clock_readme_table(players: dict[str, list[dict]]) -> str:
    """Markdown: per clock game the gate, the best fixed budget, the clock-aware bar (a fixed
    budget per T0 chosen on tuning openings, its budgets in T0 order) and the best heuristic
    (each averaged over T0 and the pool), the gate's paired differences, and the players whose
    cells are not there yet (their rows come when they are played; the bar's when it is tuned,
    `rtplan eval --tune-fixed`).

    Args:
        players: game -> its player rows (`summarize_cells`'s second list).
    """
    lines = [
        "| game (games per player) | gate | best fixed budget | clock-aware bar (k per T0) | "
        "best heuristic | gate - best fixed | gate - clock-aware bar | gate - best heuristic | "
        "not yet played |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for game, rows in sorted(players.items()):
        mean = {r["player"]: r for r in rows if r["t0"] == MEAN}
        if not mean:
            continue
        fixed = next((r for r in mean.values() if r["best_fixed"]), None)
        heur = next((r for r in mean.values() if r["best_heuristic"]), None)
        gate = mean.get("gate")
        bar = mean.get(CLOCK_BAR)
        picked = f" ({bar['picked']})" if bar else ""
        missing = [h for h in ("gate", CLOCK_BAR, *heuristic_names()) if h not in mean]
        n = next(iter(mean.values()))["games"]
        lines.append(
            f"| {game} ({n}) | {_score(gate)} | {_score(fixed, named=True)} | "
            f"{_score(bar)}{picked} | "
            f"{_score(heur, named=True)} | {_minus(gate, 'minus_best_fixed')} | "
            f"{_minus(gate, 'minus_clock_bar')} | {_minus(gate, 'minus_best_heuristic')} | "
            f"{', '.join(missing) or 'none'} |"
        )
    return "\n".join(lines)


def _write_csv(path: Path, rows: list[dict]) -> None:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def write_summary(root: str | os.PathLike, game_id: str, split: str = "eval") -> list[Path]:
    """`results/<game>/clock-eval/<split>-cells.csv`, `<split>-scores.csv`, `<split>-pairs.csv`
    (`pair_rows`, when a gate was played) and `<split>-scores.json` (last) from the split's
    cell files, with the clock-aware bar when it was tuned (`with_clock_bar`)."""
    cells = with_clock_bar(load_cells(root, game_id, split), load_clock_bar(root, game_id), split)
    cell_rows, rows = summarize_cells(cells)
    if not rows:
        return []
    folder = Path(root) / game_id / CLOCK_EVAL
    paths = [folder / f"{split}-cells.csv", folder / f"{split}-scores.csv"]
    _write_csv(paths[0], cell_rows)
    _write_csv(paths[1], rows)
    pairs = pair_rows(cells)
    if pairs:
        paths.append(folder / f"{split}-pairs.csv")
        _write_csv(paths[-1], pairs)
    paths.append(folder / f"{split}-scores.json")
    paths[-1].write_text(json.dumps({"cells": cell_rows, "players": rows}, indent=1))
    return paths


def profile(cells: list[dict], bins: int = PROFILE_BINS) -> tuple[np.ndarray, np.ndarray]:
    """The strategy profile of one player at one T0 over its cells: `[bins, n + 1]` share of
    each option (0 policy-only .. n) per normalised own-move bin, and `[bins]` its mean
    remaining clock / T0 per bin."""
    n = len(cells[0]["budgets"])
    costs = [0, *cells[0]["simulations"]]
    counts, clock, seen = np.zeros((bins, n + 1)), np.zeros(bins), np.zeros(bins)
    for c in cells:
        for opts in c["options"]:
            m = len(opts)
            if not m:
                continue
            b = np.minimum((np.arange(m) / m * bins).astype(int), bins - 1)
            valid = opts >= 0
            np.add.at(counts, (b[valid], opts[valid]), 1)
            np.add.at(clock, b, clock_curve(opts, costs, c["t0"]) / max(c["t0"], 1))
            np.add.at(seen, b, 1)
    share = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    return share, clock / np.maximum(seen, 1)


def clock_figures(root: str | os.PathLike, game_id: str, split: str = "eval") -> list[Path]:
    """Score per T0 per player, the strategy profiles (option share per normalised move number,
    per T0: the paper's figure 6) and the remaining-clock curves, under
    `results/<game>/clock-eval/`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = with_clock_bar(load_cells(root, game_id, split), load_clock_bar(root, game_id), split)
    _, rows = summarize_cells(cells)
    if not rows:
        return []
    folder = Path(root) / game_id / CLOCK_EVAL
    written = []
    players = sorted({r["player"] for r in rows}, key=lambda p: (not _is_fixed(p), p))
    t0s = sorted({r["t0"] for r in rows if r["t0"] != MEAN})

    fig, ax = plt.subplots(figsize=(7.5, 4))
    for p in players:
        # Every T0 (the clock-aware bar: those it was tuned at).
        pr = [r for t in t0s for r in rows if r["player"] == p and r["t0"] == t]
        style = "--" if _is_fixed(p) else ":" if p == CLOCK_BAR else "-"
        width = 2.5 if p == "gate" else 1.2
        ax.errorbar([r["t0"] for r in pr], [r["score"] for r in pr], yerr=[r["se"] for r in pr],
                    ls=style, lw=width, marker="o", ms=3, capsize=2, label=p)  # fmt: skip
    ax.set_xlabel("T0 (ticks = simulations per player)")
    ax.set_ylabel("expected score vs the pool (± SE)")
    ax.set_title(f"{game_id}: score per clock, {split} openings")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    written.append(folder / f"{split}-score-per-t0.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    # The bar's profile is its chosen budgets' (fixed budgets have none).
    adaptive = [p for p in players if not _is_fixed(p) and p not in ("policy-only", CLOCK_BAR)]
    budgets = cells[0]["budgets"]
    labels = ["policy-only", *[f"k{b}" for b in budgets]]
    fig, axes = plt.subplots(
        len(adaptive), len(t0s), figsize=(2.4 * len(t0s), 1.9 * len(adaptive)), squeeze=False
    )
    x = (np.arange(PROFILE_BINS) + 0.5) / PROFILE_BINS
    curves = {}
    for i, p in enumerate(adaptive):
        for j, t0 in enumerate(t0s):
            ax, bottom = axes[i, j], np.zeros(PROFILE_BINS)
            played = [c for c in cells if c["player"] == p and c["t0"] == t0]
            if not played:  # a player played at some T0s only
                ax.set_axis_off()
                continue
            share, curves[p, t0] = profile(played)
            for o, lab in enumerate(labels):
                ax.bar(x, share[:, o], width=1 / PROFILE_BINS, bottom=bottom, label=lab)
                bottom += share[:, o]
            ax.set_title(f"{p}, T0={t0}", fontsize=8)
            ax.tick_params(labelsize=6)
    axes[0, 0].legend(fontsize=6)
    fig.supxlabel("the player's move / its moves in the game")
    fig.supylabel("share of moves")
    fig.suptitle(f"{game_id}: strategy profiles (option per normalised move number)")
    fig.tight_layout()
    written.append(folder / f"{split}-profile.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(t0s), figsize=(2.8 * len(t0s), 3), squeeze=False)
    for j, t0 in enumerate(t0s):
        ax = axes[0, j]
        for p in (q for q in players if q != CLOCK_BAR):  # the bar: its budgets' curves
            played = [c for c in cells if c["player"] == p and c["t0"] == t0]
            if not played:
                continue
            if (p, t0) not in curves:
                _, curves[p, t0] = profile(played)
            ax.plot(x, curves[p, t0], ls="--" if _is_fixed(p) else "-", label=p)
        ax.set_title(f"T0={t0}", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=6)
    axes[0, 0].set_ylabel("clock left / T0")
    axes[0, -1].legend(fontsize=6)
    fig.supxlabel("the player's move / its moves in the game")
    fig.suptitle(f"{game_id}: remaining clock before each move")
    fig.tight_layout()
    written.append(folder / f"{split}-clocks.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    return written
