"""Ships a run's planner: params and provenance (`harness.ship`) plus its learning curve."""

from __future__ import annotations

import csv
from pathlib import Path

import harness
from harness import checkpoint as ckpt
from harness.run import LOG
from planner.store import PLANNER_FILE


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
    ax.set_xlabel("frames (committed) / plies (clock) of self-play")
    ax.set_ylabel("return / score")
    ax.set_title(title)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def ship(
    run_dir: str | Path, dest_root: str | Path = "checkpoints", variant: str | None = None
) -> Path:
    """Ships `<run>/planner.msgpack` to `<dest_root>/<game>/[<variant>/]` (`harness.ship`) with
    the run's `learning_curve.png`.

    Returns:
        The shipped checkpoint's path.
    """
    path = harness.ship(
        run_dir,
        dest_root,
        file_name=PLANNER_FILE,
        what="planner",
        describe=_describe,
        variant=variant,
        notes=["- learning curve: `learning_curve.png` (from `log.csv`)"],
    )
    game = ckpt.load_metadata(path)["game"]
    plot_learning_curve(
        Path(run_dir) / LOG, path.parent / "learning_curve.png", f"{game} planner training"
    )
    return path


def _describe(ev: dict, train_cfg: dict) -> str:
    """The README's evaluation text: what the score measured, on how many games."""
    text = (
        f"{ev['eval_mean']:.2f} +- {ev.get('eval_se') or 0:.2f} at iteration {ev.get('iteration')}"
    )
    n = train_cfg.get("eval_episodes")
    if ev.get("eval_vs_random") is not None:
        return (
            f"{text}: mean score of the largest option vs random "
            f"({ev['eval_vs_random']:.2f}) and vs the policy-only player "
            f"({ev['eval_vs_reflex']:.2f}), {n} games each"
        )
    return f"{text} ({n} episodes, {train_cfg.get('eval_max_decisions')} decisions max)"
