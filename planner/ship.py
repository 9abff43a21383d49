"""Ships a run's planner: params, provenance and learning curve into checkpoints/<game>/."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

from planner import checkpoint as ckpt

SHIPPED = "planner.msgpack"


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
    """Copies `<run>/planner.msgpack` (+ metadata) to `<dest_root>/<game>/` (or, for a
    `variant` such as "train-k2", `<dest_root>/<game>/<variant>/`, beside the game's base
    checkpoint), with a README.md (command, seed, iteration, frames, evaluation) and
    `learning_curve.png`.

    Returns:
        The shipped checkpoint's path.
    """
    if variant is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", variant):
        raise ValueError(f"variant {variant!r} must be a plain folder name ([A-Za-z0-9_.-])")
    run = Path(run_dir)
    src = run / SHIPPED
    meta = ckpt.load_metadata(src)  # verifies the file
    game = meta["game"]
    dest = Path(dest_root) / game / (variant or "")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest / SHIPPED)
    shutil.copyfile(src.with_name(SHIPPED + ".json"), dest / (SHIPPED + ".json"))
    shutil.copyfile(run / "log.csv", dest / "log.csv")
    plot_learning_curve(run / "log.csv", dest / "learning_curve.png", f"{game} planner training")
    ev = meta.get("last_eval") or {}
    best_path = run / "best.msgpack"
    if meta.get("source") == "best" and best_path.exists():
        best = ckpt.load_metadata(best_path)
        if best.get("sha256") == meta.get("sha256"):  # the shipped params are the best's
            ev = best.get("eval") or ev
            meta = dict(meta, iteration=best["iteration"], frames=best["frames"])
    lines = [
        f"# {game} planner checkpoint" + (f" ({variant})" if variant else ""),
        "",
        f"- file: `{SHIPPED}` ({meta.get('bytes', '?')} bytes of params; sha256 "
        f"`{meta.get('sha256', '?')[:16]}...`), metadata in `{SHIPPED}.json`",
        f"- produced by: `{' '.join(meta.get('argv', ['?']))}` ({meta.get('source', '?')} "
        "params of the run"
        + (
            "; a resumed run: the settings it resumed are `train_config` in the metadata"
            if "--resume" in meta.get("argv", [])
            else ""
        )
        + ")",
        f"- seed {meta.get('seed', '?')}, iteration {meta.get('iteration', '?')}, "
        f"{meta.get('frames', '?')} self-play frames, git commit `{meta.get('git_commit', '?')}`",
        "- evaluation of these params: " + _describe(ev, meta.get("train_config", {})),
        "- learning curve: `learning_curve.png` (from `log.csv`)",
        "",
    ]
    (dest / "README.md").write_text("\n".join(lines))
    return dest / SHIPPED


def _describe(ev: dict, train_cfg: dict) -> str:
    if not ev:
        return "none recorded"
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
