"""Ships a run's planner: params and provenance (`harness.ship`) plus its learning curve."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

from rtplan import harness
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.curve import plot_learning_curve
from rtplan.harness.run import LOG
from rtplan.planner.store import load_planner, save_planner

#: The name of a shipped planner's training log in `results/<game>/training/`.
PLANNER_LOG = "planner-log.csv"


def ship(
    run_dir: str | Path,
    dest_root: str | Path | None = None,
    variant: str | None = None,
    snapshot: str | Path | None = None,
) -> Path:
    """Ships `<run>/planner.msgpack` to `<dest_root>/<game>/` (a variant to the archive; the
    log to the results: `harness.ship`) with the run's `learning_curve.png`.

    With `snapshot`, the params shipped are those of that training checkpoint of the run (a copy
    of its `checkpoint.msgpack`, e.g. one of `bench/strength_race.py`'s snapshots) instead of
    the run's export: for params chosen by outside matches rather than by the run's own
    evaluation. Their provenance is the snapshot's (iteration, frames, commands), the log and
    the curve stop at its iteration, and its source reads `snapshot <file name>`.

    Returns:
        The shipped checkpoint's path.
    """
    run = Path(run_dir)
    if snapshot is None:
        return _ship(run, dest_root, variant)
    with tempfile.TemporaryDirectory() as tmp:
        staged = _stage_snapshot(run, Path(snapshot), Path(tmp))
        return _ship(staged, dest_root, variant)


def _ship(staged: Path, dest_root, variant) -> Path:
    path = harness.ship(
        staged,
        dest_root,
        file_name=ckpt.PLANNER_FILE,
        what="planner",
        describe=_describe,
        variant=variant,
        notes=["- learning curve: `learning_curve.png` (drawn from the training log)"],
        log_name=PLANNER_LOG,
    )
    game = ckpt.load_metadata(path)["game"]
    plot_learning_curve(
        staged / LOG, path.parent / "learning_curve.png", f"{game} planner training"
    )
    return path


def _stage_snapshot(run: Path, snapshot: Path, tmp: Path) -> Path:
    """`tmp` as a run folder whose export is the snapshot's params and whose log ends there."""
    meta = ckpt.load_metadata(snapshot)  # verifies the file
    if meta.get("kind") != "train_state":
        raise ValueError(
            f"{snapshot} is a {meta.get('kind')!r} file, not a training checkpoint (train_state)"
        )
    run_meta = ckpt.load_metadata(run / ckpt.PLANNER_FILE)
    if (meta.get("game"), meta.get("seed"), (meta.get("commands") or [None])[0]) != (
        run_meta.get("game"),
        run_meta.get("seed"),
        (run_meta.get("commands") or [None])[0],
    ):
        raise ValueError(f"{snapshot} is not a checkpoint of the run {run} (game, seed, command)")
    cfg, params, _ = load_planner(meta["game"], snapshot)
    iteration = meta["iteration"]
    last = meta.get("last_eval") or {}
    keep = (
        "train_config",
        "iteration",
        "seed",
        "frames",
        "wall_time",
        "argv",
        "commands",
        "devices",
    )
    save_planner(
        tmp / ckpt.PLANNER_FILE,
        cfg,
        params,
        **{k: meta[k] for k in keep if k in meta},
        game=meta["game"],
        git_commit=meta.get("git_commit"),
        timestamp=meta.get("timestamp"),
        source=f"snapshot {snapshot.name}",
        # The run's own evaluation describes these params only if it ran at their iteration.
        last_eval=last if last.get("iteration") == iteration else None,
    )
    with open(run / LOG, newline="") as f:
        rows = list(csv.reader(f))
    with open(tmp / LOG, "w", newline="") as f:
        csv.writer(f).writerows([rows[0], *(r for r in rows[1:] if int(r[0]) <= iteration)])
    return tmp


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
