"""Gate checkpoints of either kind: the checks every gate loader makes, and the planner file a
gate was trained over (its sha256)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from rtplan.harness import checkpoint as ckpt
from rtplan.planner.configs import config_from_dict
from rtplan.planner.options import Planner

__all__ = ["check_gate_file", "check_trained_over", "file_sha256"]


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (ties a gate to the exact planner it was trained over)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_trained_over(meta: dict, planner_file: str | os.PathLike, source) -> None:
    """Raises `CheckpointError` unless the gate `source` (with metadata `meta`) was trained over
    the exact planner at `planner_file` (its recorded `planner_sha256` is that file's)."""
    want = meta.get("planner_sha256")
    if want != file_sha256(planner_file):
        raise ckpt.CheckpointError(
            f"{source} was trained over the planner with sha256 {str(want)[:16]}..., "
            f"not the one at {planner_file}"
        )


def check_gate_file(
    path: str | os.PathLike, planner: Planner, *, kind: str, what: str, planner_file=None
) -> dict:
    """The metadata of a gate checkpoint (committed or clock) after the checks every gate
    loader makes: its `kind`, its game and budgets are the planner's, it was trained over a
    planner of the same shape and (with `planner_file`, when it recorded one) the same weights.

    Raises:
        harness.checkpoint.CheckpointError: the first check that fails, naming the file.
    """
    meta = ckpt.load_metadata(path)
    game_id = planner.config.game_id
    if meta.get("kind") != kind:
        raise ckpt.CheckpointError(f"{path} holds a {meta.get('kind')!r}, not {what}")
    if meta.get("game") != game_id:
        raise ckpt.CheckpointError(f"{path} is a gate for {meta.get('game')}, not {game_id}")
    if meta.get("budgets") != list(planner.config.budgets):
        raise ckpt.CheckpointError(
            f"{path} picks among budgets {meta.get('budgets')}, but the planner's are "
            f"{list(planner.config.budgets)}"
        )
    # Compared as configs: the JSON metadata holds lists where the config has tuples.
    try:
        trained_over = config_from_dict(meta["planner_config"])
    except (KeyError, TypeError, ValueError):
        trained_over = None
    if trained_over != planner.config:
        raise ckpt.CheckpointError(f"{path} was trained over a planner of another shape")
    if meta.get("planner_sha256") and planner_file is not None:
        check_trained_over(meta, planner_file, path)
    return meta
