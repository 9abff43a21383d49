"""The deployment figure (deploy.png): return, miss rate and p95 slack against FPS."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rtplan.deploy._experiment import Experiment


def _plot(path: Path, summaries: list[dict], exp: Experiment) -> None:
    """The paper's deployment figure: return, miss rate and p95 slack against FPS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fps = [s["fps"] for s in summaries]
    fig, (ret, miss, slack) = plt.subplots(1, 3, figsize=(12, 3.4))
    ret.errorbar(
        fps,
        [s["return"]["mean"] for s in summaries],
        [s["return"]["se"] for s in summaries],
        marker="o",
        capsize=3,
        label="deployed",
    )
    ret.errorbar(
        fps,
        [s["simulated"]["mean"] for s in summaries],
        [s["simulated"]["se"] for s in summaries],
        marker="s",
        capsize=3,
        linestyle="--",
        label="simulated clock",
    )
    ret.set(xlabel="FPS", ylabel="return (mean ± SE)", title=f"{exp.game} ({exp.agent})")
    ret.legend()
    rates = [np.nan if s["miss_rate"] is None else 100 * s["miss_rate"] for s in summaries]
    miss.plot(fps, rates, marker="o", color="tab:red")
    if exp.until_miss_rate is not None:
        miss.axhline(100 * exp.until_miss_rate, color="grey", linestyle=":")
    miss.set(xlabel="FPS", ylabel="deadline miss rate (%)", title="misses")
    slacks = [np.nan if s["slack_p95_ms"] is None else s["slack_p95_ms"] for s in summaries]
    slack.plot(fps, slacks, marker="o", color="tab:green")
    over = [f for f, v in zip(fps, slacks) if np.isnan(v)]
    if over:  # more than 5% of the planned actions missed: no slack 95% of them beat
        slack.plot(over, [0] * len(over), "x", color="tab:red", label="> 5% missed")
        slack.legend()
    slack.axhline(0, color="grey", linestyle=":")
    slack.set(xlabel="FPS", ylabel="ms", title="p95 slack (95% of planned actions beat it)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
