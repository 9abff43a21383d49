"""The learning curve of a run, drawn from its log (`harness.run.LOG`): evaluation and episodes."""

from __future__ import annotations

import csv
from pathlib import Path

__all__ = ["plot_learning_curve"]


def _rows(log: Path) -> list[dict]:
    with open(log) as f:
        return list(csv.DictReader(f))


def plot_learning_curve(log: Path, path: Path, title: str) -> None:
    """Eval score (mean +- SE) and episode return against frames, from a run's log.csv."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _rows(log)
    ev = [r for r in rows if r.get("eval_mean")]
    ep = [r for r in rows if r.get("episode_return")]
    fig, ax = plt.subplots(figsize=(7, 4))
    if ep:
        ax.plot(
            [float(r["frames"]) for r in ep],
            [float(r["episode_return"]) for r in ep],
            color="0.7",
            lw=0.8,
            label="self-play episodes (mean per iteration)",
        )
    if ev:
        x = [float(r["frames"]) for r in ev]
        y = [float(r["eval_mean"]) for r in ev]
        se = [float(r["eval_se"] or 0) for r in ev]
        ax.errorbar(
            x, y, yerr=se, marker="o", color="tab:blue", capsize=3, label="evaluation (mean +- SE)"
        )
    # A clock gate's log: its score against always-k per clock and their mean (no SE logged).
    sc = [r for r in rows if r.get("eval_score")]
    clocks = [c for c in (rows[0] if rows else {}) if c.startswith("eval_t") and c[6:].isdigit()]
    for col, style in [("eval_score", "o-")] + [(c, ".--") for c in clocks]:
        if sc and not ev:
            label = (
                "evaluation score (mean over clocks)" if col == "eval_score" else f"T0 {col[6:]}"
            )
            x = [float(r["frames"]) for r in sc if r.get(col)]
            ax.plot(x, [float(r[col]) for r in sc if r.get(col)], style, ms=3, label=label)
    ax.set_xlabel("frames (committed) / plies (clock) of self-play")
    ax.set_ylabel("return / score")
    ax.set_title(title)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
