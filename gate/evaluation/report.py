"""`rtplan report`: the results table (CSV/JSON, README) and figures from `rtplan eval`'s files."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from rtplan.gate.committed.choosers import ABLATIONS, POLICY_ONLY, condition_names, is_gate
from rtplan.gate.committed.triggers import FEATURES, PIECE_NAMES
from rtplan.gate.evaluation.committed import load_conditions
from rtplan.harness.stats import paired, standard_error

__all__ = [
    "CLOCK_README_BEGIN",
    "CLOCK_README_END",
    "HOLDOUT_README_BEGIN",
    "HOLDOUT_README_END",
    "README_BEGIN",
    "README_END",
    "best_fixed_k",
    "holdout_readme_table",
    "report",
    "summarize",
]

README_BEGIN = "<!-- results:begin (rtplan report writes this table) -->"
README_END = "<!-- results:end -->"
CLOCK_README_BEGIN = "<!-- clock-results:begin (rtplan report writes this table) -->"
CLOCK_README_END = "<!-- clock-results:end -->"
HOLDOUT_README_BEGIN = "<!-- holdout-results:begin (rtplan report writes this table) -->"
HOLDOUT_README_END = "<!-- holdout-results:end -->"
#: The paired SEs a gate must clear on the holdout (docs/preregistration.md).
HOLDOUT_Z = 2.0
#: The clock games' splits `report` summarises (tuning cells are model selection, not results).
CLOCK_SPLITS = ("eval", "holdout")
#: Normalised episode bins of the strategy profiles.
PROFILE_BINS = 10


def best_fixed_k(tuning: dict[str, dict]) -> str | None:
    """The always-k condition with the best mean return on the tuning seeds (None: no tuning
    results). Ties go to the smaller k."""
    fixed = {n: np.mean(r["returns"]) for n, r in tuning.items() if n[1:].isdigit()}
    if not fixed:
        return None
    return max(sorted(fixed, key=lambda n: int(n[1:])), key=lambda n: fixed[n])


def _k_dist(rec: dict, budgets: list[int]) -> dict[str, float]:
    ks = np.concatenate(rec["ks"]) if rec["ks"] else np.zeros(0)
    if not len(ks):
        return {}
    return {f"k{b}": float((ks == b).mean()) for b in budgets}


def summarize(game_id: str, evals: dict[str, dict], tuning: dict[str, dict]) -> list[dict]:
    """One row per condition: mean +- SE, k distribution, and gate - condition (paired SE)."""
    if not evals:
        return []
    seeds = {n: r["seeds"] for n, r in evals.items()}
    first = next(iter(seeds.values()))
    unpaired = [n for n, s in seeds.items() if s != first]
    if unpaired:
        raise ValueError(f"{game_id}: conditions {unpaired} played other seeds than the rest")
    best = best_fixed_k(tuning)
    gate = evals.get("gate")
    rows = []
    for name, rec in evals.items():
        returns = np.asarray(rec["returns"])
        n = len(returns)
        ks = np.concatenate(rec["ks"]) if rec["ks"] and sum(map(len, rec["ks"])) else None
        row = {
            "game": game_id,
            "condition": name,
            "best_fixed": name == best,
            "episodes": n,
            "mean": float(returns.mean()),
            "se": standard_error(returns),
            "mean_k": float(ks.mean()) if ks is not None else None,
            **_k_dist(rec, rec["budgets"]),
            "mean_frames": float(np.mean(rec["frames"])),
        }
        if gate is not None and name != "gate":
            diff, se = paired(gate["returns"], rec["returns"])
            row["gate_minus"] = diff
            row["gate_minus_se"] = se
        rows.append(row)
    order = {"gate": 0, **{a: 1 for a in ABLATIONS}, "random": 3, POLICY_ONLY: 4}
    rows.sort(key=lambda r: (order.get(r["condition"], 0.5 if is_gate(r["condition"]) else 2),
                             r["condition"]))  # fmt: skip
    return rows


def _cell(r: dict | None) -> str:
    return f"{r['mean']:.1f} ± {r['se']:.1f}" if r else "—"


def _diff(r: dict | None) -> str:
    if not r or "gate_minus" not in r:
        return "—"
    return f"{r['gate_minus']:+.1f} ± {r['gate_minus_se']:.1f}"


def _fmt(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def readme_table(rows: list[dict]) -> str:
    """Markdown: per game the gate, best fixed k, random k and policy-only, with paired diffs."""
    lines = [
        "| game | gate | best fixed k (tuning) | random k | policy-only | gate - best fixed | "
        "gate - random | gate mean k |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for game in sorted({r["game"] for r in rows}):
        by = {r["condition"]: r for r in rows if r["game"] == game}
        best = next((r for r in by.values() if r["best_fixed"]), None)
        gate = by.get("gate")

        best_cell = f"{_cell(best)} ({best['condition']})" if best else "— (no tuning run)"
        n = (gate or best or next(iter(by.values())))["episodes"]
        lines.append(
            f"| {game} (n={n}) | {_cell(gate)} | {best_cell} | {_cell(by.get('random'))} | "
            f"{_cell(by.get(POLICY_ONLY))} | {_diff(best)} | {_diff(by.get('random'))} | "
            f"{_fmt(gate['mean_k'], 2) if gate else '—'} |"
        )
    return "\n".join(lines)


def holdout_readme_table(rows: list[dict], unfinished: dict[str, list[str]]) -> str:
    """Markdown: the pre-registered evaluation (docs/preregistration.md) per committed game
    and gate (the shipped `gate`, then any second gate): the gate against the best fixed k
    chosen on the tuning seeds, paired over the holdout seeds, the preregistered decision, and
    the conditions not yet finished."""
    lines = [
        "| game (holdout seeds) | gate | mean | best fixed k (tuning) | gate - best fixed "
        f"| gate > best fixed by {HOLDOUT_Z:g} SE? | not yet finished |",
        "|---|---|---|---|---|---|---|",
    ]
    for game in sorted(set(unfinished) | {r["game"] for r in rows}):
        by = {r["condition"]: r for r in rows if r["game"] == game}
        best = next((r for r in by.values() if r["best_fixed"]), None)
        n = next(iter(by.values()))["episodes"] if by else 0
        best_cell = f"{_cell(best)} ({best['condition']})" if best else "—"
        gates = [r for r in by.values() if is_gate(r["condition"])] or [None]
        for i, gate in enumerate(gates):
            diff = (gate or {}).get("minus_best")
            verdict, diff_cell = "—", "—"
            if diff is not None:
                se = gate["minus_best_se"]
                z = diff / se if se else 0.0
                verdict = f"{'yes' if z > HOLDOUT_Z else 'no'} ({z:+.1f} SE)"
                diff_cell = f"{diff:+.1f} ± {se:.1f}"
            name = "shipped" if gate is None or gate["condition"] == "gate" else gate["condition"]
            missing = ", ".join(unfinished.get(game, [])) or "none"
            lines.append(
                f"| {game} ({n or '—'}) | {name} | {_cell(gate)} | {best_cell} | {diff_cell} | "
                f"{verdict} | {missing if i == 0 else ''} |"
            )
    return "\n".join(lines)


def _holdout(root: Path, game: str, tuning: dict[str, dict]) -> tuple[list[dict], list[str]]:
    """The holdout rows of a committed game and the conditions it has not finished."""
    hold = load_conditions(root, game, "holdout")
    partial = sorted(p.stem for p in (root / game / "holdout" / "partial").glob("*.json"))
    if not hold and not partial:
        return [], []
    rows = [dict(r, split="holdout") for r in summarize(game, hold, tuning)]
    best = next((r["condition"] for r in rows if r["best_fixed"]), None)
    for r in rows:  # every gate against the pre-registered baseline, paired seed by seed
        if best in hold and is_gate(r["condition"]):
            diff, se = paired(hold[r["condition"]]["returns"], hold[best]["returns"])
            r["minus_best"], r["minus_best_se"] = diff, se
    budgets = next(iter(hold.values()))["budgets"] if hold else []
    expected = condition_names(budgets, gate=True) if budgets else []
    missing = [n for n in expected if n not in hold and n not in partial]
    return rows, [*(f"{n} (partial)" for n in partial), *missing]


def _write_rows(root: Path, name: str, rows: list[dict]) -> None:
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k not in rows[0], k))
    with (root / f"{name}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    (root / f"{name}.json").write_text(json.dumps(rows, indent=1))


def _update_readme(
    readme: Path, table: str, begin: str = README_BEGIN, end: str = README_END
) -> bool:
    text = readme.read_text()
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(f"{head}{begin}\n{table}\n{end}{tail}")
    return True


def _figures(game: str, evals: dict[str, dict], rows: list[dict], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    # Main results: every condition's mean +- SE (paper figure 4, one panel per game).
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = [r["condition"] for r in rows if r["condition"] not in ABLATIONS]
    means = [next(r["mean"] for r in rows if r["condition"] == n) for n in names]
    ses = [next(r["se"] for r in rows if r["condition"] == n) for n in names]
    colours = ["#d62728" if n == "gate" else "#1f77b4" for n in names]
    ax.bar(names, means, yerr=ses, color=colours, capsize=3)
    ax.set_ylabel("return (mean ± SE)")
    ax.set_title(f"{game}: gate vs baselines, {rows[0]['episodes']} paired evaluation seeds")
    fig.tight_layout()
    written.append(folder / "main.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    gate = evals.get("gate")
    if gate is None:
        return written
    budgets = gate["budgets"]
    # Strategy profile: the gate's k frequency over 10 normalised episode bins.
    counts = np.zeros((PROFILE_BINS, len(budgets)))
    for ks, at, frames in zip(gate["ks"], gate["decision_frames"], gate["frames"]):
        if not len(ks) or frames <= 0:
            continue
        bins = np.minimum((np.asarray(at) / frames * PROFILE_BINS).astype(int), PROFILE_BINS - 1)
        for j, b in enumerate(budgets):
            np.add.at(counts[:, j], bins[ks == b], 1)
    freq = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(6, 3))
    bottom = np.zeros(PROFILE_BINS)
    x = (np.arange(PROFILE_BINS) + 0.5) / PROFILE_BINS
    for j, b in enumerate(budgets):
        ax.bar(x, freq[:, j], width=1 / PROFILE_BINS, bottom=bottom, label=f"k={b}")
        bottom += freq[:, j]
    ax.set_xlabel("episode progress (fraction of the episode's frames)")
    ax.set_ylabel("share of decisions")
    ax.set_title(f"{game}: the gate's strategy profile")
    ax.legend(fontsize=7, ncol=len(budgets))
    fig.tight_layout()
    written.append(folder / "profile.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    # Triggers: each recorded state feature against the chosen k.
    feats = gate.get("features") or {}
    if feats:
        names = [n for n in FEATURES.get(game, ()) if n in feats]
        fig, axes = plt.subplots(1, len(names), figsize=(3.3 * len(names), 3))
        axes = np.atleast_1d(axes)
        ks_all = np.concatenate(gate["ks"])
        for ax, n in zip(axes, names):
            v = np.concatenate([np.asarray(e) for e in feats[n]])
            if n == "piece":
                table = np.zeros((len(PIECE_NAMES), len(budgets)))
                for j, b in enumerate(budgets):
                    for p in range(len(PIECE_NAMES)):
                        table[p, j] = ((v == p) & (ks_all == b)).sum()
                table /= np.maximum(table.sum(1, keepdims=True), 1)
                mean_k = table @ np.asarray(budgets)
                ax.bar(PIECE_NAMES, mean_k)
                ax.set_ylabel("mean chosen k")
                ax.set_xlabel("falling piece")
            else:
                data = [v[ks_all == b] for b in budgets]
                ax.boxplot([d if len(d) else [np.nan] for d in data], showfliers=False)
                ax.set_xticks(range(1, len(budgets) + 1), [f"k={b}" for b in budgets])
                ax.set_ylabel(n.replace("_", " "))
        fig.suptitle(f"{game}: state features at the gate's decisions, by chosen k")
        fig.tight_layout()
        written.append(folder / "triggers.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

    # Input ablations at evaluation.
    abl = [r for r in rows if r["condition"] in ("gate", *ABLATIONS)]
    if len(abl) > 1:
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.bar(
            [r["condition"] for r in abl],
            [r["mean"] for r in abl],
            yerr=[r["se"] for r in abl],
            capsize=3,
        )
        ax.set_ylabel("return (mean ± SE)")
        ax.set_title(f"{game}: gate inputs zeroed at evaluation")
        ax.tick_params(axis="x", labelsize=7)
        fig.tight_layout()
        written.append(folder / "ablations.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written


def report(
    results: str | os.PathLike = "results",
    *,
    readme: str | os.PathLike | None = "README.md",
    figures: bool = True,
) -> dict:
    """Summarises every game under `results/`: `summary.csv`, `summary.json`, per-game
    figures, and the README's results tables (between their markers): the committed games'
    and the clock games'."""
    from rtplan.gate.evaluation.clock_report import (
        clock_figures,
        clock_readme_table,
        clocks_folder,
        write_summary,
    )

    root = Path(results)
    rows, files, clock_files, clock_players = [], [], [], {}
    hold_rows, unfinished = [], {}
    for game_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []:
        game = game_dir.name
        # Clock games: their own tables and figures under <game>/clock-eval/, per split played
        # (eval; holdout for a pre-registered second look; each one's clocks off the
        # pre-registered five, `--clocks`, apart); the README's table is eval's.
        for split in (*CLOCK_SPLITS, *map(clocks_folder, CLOCK_SPLITS)):
            summary = write_summary(root, game, split)
            clock_files += summary
            if summary and split == "eval":
                clock_players[game] = json.loads(summary[-1].read_text())["players"]
            if summary and figures:
                clock_files += clock_figures(root, game, split)
        tuning = load_conditions(root, game, "tuning")
        game_hold, game_unfinished = _holdout(root, game, tuning)
        hold_rows += game_hold
        if game_unfinished:
            unfinished[game] = game_unfinished
        evals = load_conditions(root, game, "eval")
        if not evals:
            continue
        game_rows = summarize(game, evals, tuning)
        rows += game_rows
        if figures:
            files += _figures(game, evals, game_rows, game_dir)
    if not rows and not clock_files and not hold_rows and not unfinished:
        raise FileNotFoundError(f"no evaluation results under {root}/<game>/eval/ (rtplan eval)")
    clock_table = clock_readme_table(clock_players) if clock_players else ""
    updated = False
    if readme and Path(readme).exists() and clock_table:
        updated = _update_readme(Path(readme), clock_table, CLOCK_README_BEGIN, CLOCK_README_END)
    table = ""
    if rows:
        _write_rows(root, "summary", rows)
        table = readme_table(rows)
        if readme and Path(readme).exists():
            updated = _update_readme(Path(readme), table) or updated
    hold_table = ""
    if hold_rows or unfinished:
        if hold_rows:
            _write_rows(root, "holdout-summary", hold_rows)
        hold_table = holdout_readme_table(hold_rows, unfinished)
        if readme and Path(readme).exists():
            begin, end = HOLDOUT_README_BEGIN, HOLDOUT_README_END
            updated = _update_readme(Path(readme), hold_table, begin, end) or updated
    return {
        "rows": rows,
        "figures": files + clock_files,
        "table": "\n\n".join(t for t in (table, hold_table, clock_table) if t),
        "readme_updated": updated,
    }
