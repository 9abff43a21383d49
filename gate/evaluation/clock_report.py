"""The clock games' tables and figures from `rtplan eval`'s cell files (`gate.evaluation.clock`)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gate.clock.players import heuristic_names
from gate.committed.choosers import is_gate
from harness.stats import paired, standard_error
from planner.matches import unique_games

__all__ = [
    "CLOCK_EVAL",
    "PROFILE_BINS",
    "clock_curve",
    "clock_figures",
    "clock_readme_table",
    "load_cells",
    "option_text",
    "summarize_cells",
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
    """Every cell file of a game's split, with `options` as int arrays."""
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
    the baselines). Only (T0, opponent) cells every player has are compared.

    Returns:
        (cell rows, player rows).
    """
    by = _ordered(cells)
    if not by:
        return [], []
    common = sorted(set.intersection(*(set(v) for v in by.values())))
    t0s = sorted({t for t, _ in common})
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
            })  # fmt: skip

    def mean_score(p: str) -> float:
        return float(_scores(by[p], common).mean())

    fixed = [p for p in by if _is_fixed(p)]
    heur = [p for p in by if p in heuristic_names()]
    best_fixed = max(sorted(fixed), key=mean_score) if fixed else None
    best_heur = max(sorted(heur), key=mean_score) if heur else None
    rows = []
    for player, cs in sorted(by.items()):
        for t0 in [*t0s, MEAN]:
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
            rows.append(row)
    return cell_rows, rows


def pair_rows(cells: list[dict]) -> list[dict]:
    """Every gate's paired difference against every other player of the cells, per T0 and
    averaged over T0 (`MEAN`), over the (T0, opponent) cells both have, game by game: what a
    pre-registered rule with fixed bars reads (docs/preregistration.md), where
    `summarize_cells` names the best baseline on the same games."""
    by = _ordered(cells)
    rows = []
    for player in sorted(p for p in by if is_gate(p)):
        for other in sorted(q for q in by if q != player):
            both = sorted(set(by[player]) & set(by[other]))
            for t0 in [*sorted({t for t, _ in both}), MEAN]:
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


def _minus(r: dict | None, label: str) -> str:
    if not r or f"minus_best_{label}" not in r:
        return "—"
    d, se = r[f"minus_best_{label}"], r[f"minus_best_{label}_se"]
    return f"{d:+.3f} ± {se:.3f} ({d / se:+.1f} SE)" if se > 0 else f"{d:+.3f} ± 0"


def clock_readme_table(players: dict[str, list[dict]]) -> str:
    """Markdown: per clock game the gate, the best fixed budget and the best heuristic (each
    averaged over T0 and the pool), the gate's paired differences, and the players whose cells
    are not there yet (their rows come when they are played).

    Args:
        players: game -> its player rows (`summarize_cells`'s second list).
    """
    lines = [
        "| game (games per player) | gate | best fixed budget | best heuristic | "
        "gate - best fixed | gate - best heuristic | not yet played |",
        "|---|---|---|---|---|---|---|",
    ]
    for game, rows in sorted(players.items()):
        mean = {r["player"]: r for r in rows if r["t0"] == MEAN}
        if not mean:
            continue
        fixed = next((r for r in mean.values() if r["best_fixed"]), None)
        heur = next((r for r in mean.values() if r["best_heuristic"]), None)
        gate = mean.get("gate")
        missing = [h for h in ("gate", *heuristic_names()) if h not in mean]
        n = next(iter(mean.values()))["games"]
        lines.append(
            f"| {game} ({n}) | {_score(gate)} | "
            f"{_score(fixed, named=True)} | {_score(heur, named=True)} | "
            f"{_minus(gate, 'fixed')} | {_minus(gate, 'heuristic')} | "
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
    cell files."""
    cells = load_cells(root, game_id, split)
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

    cells = load_cells(root, game_id, split)
    _, rows = summarize_cells(cells)
    if not rows:
        return []
    folder = Path(root) / game_id / CLOCK_EVAL
    written = []
    players = sorted({r["player"] for r in rows}, key=lambda p: (not _is_fixed(p), p))
    t0s = sorted({r["t0"] for r in rows if r["t0"] != MEAN})

    fig, ax = plt.subplots(figsize=(7.5, 4))
    for p in players:
        pr = [next(r for r in rows if r["player"] == p and r["t0"] == t) for t in t0s]
        style = "--" if _is_fixed(p) else "-"
        width = 2.5 if p == "gate" else 1.2
        ax.errorbar(t0s, [r["score"] for r in pr], yerr=[r["se"] for r in pr], ls=style,
                    lw=width, marker="o", ms=3, capsize=2, label=p)  # fmt: skip
    ax.set_xlabel("T0 (ticks = simulations per player)")
    ax.set_ylabel("expected score vs the pool (± SE)")
    ax.set_title(f"{game_id}: score per clock, {split} openings")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    written.append(folder / f"{split}-score-per-t0.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    adaptive = [p for p in players if not _is_fixed(p) and p != "policy-only"]
    budgets = cells[0]["budgets"]
    labels = ["policy-only", *[f"k{b}" for b in budgets]]
    fig, axes = plt.subplots(
        len(adaptive), len(t0s), figsize=(2.4 * len(t0s), 1.9 * len(adaptive)), squeeze=False
    )
    x = (np.arange(PROFILE_BINS) + 0.5) / PROFILE_BINS
    curves = {}
    for i, p in enumerate(adaptive):
        for j, t0 in enumerate(t0s):
            share, clock = profile([c for c in cells if c["player"] == p and c["t0"] == t0])
            curves[p, t0] = clock
            ax, bottom = axes[i, j], np.zeros(PROFILE_BINS)
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
        for p in players:
            if (p, t0) not in curves:
                _, curves[p, t0] = profile([c for c in cells if c["player"] == p and c["t0"] == t0])
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
