"""Planner checkpoints as used by evaluation and the services: (config, params, metadata)."""

from __future__ import annotations

import os

import jax

from rtplan.harness import checkpoint as ckpt
from rtplan.planner.configs import config_from_dict, config_to_dict, default_config
from rtplan.planner.options import Planner, PlannerConfig


def load_planner(game_id: str, checkpoint: str | None) -> tuple[PlannerConfig, object, dict]:
    """(config, params, metadata) from a checkpoint, or fresh parameters when None."""
    if checkpoint is None:
        cfg = default_config(game_id)
        return cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)), {"checkpoint": None}
    meta = ckpt.load_metadata(checkpoint)
    cfg = config_from_dict(meta["planner_config"])
    if cfg.game_id != game_id:
        raise ValueError(f"checkpoint {checkpoint} is for {cfg.game_id}, not {game_id}")
    # Planner checkpoints (train.py's export) hold {"params": flax variables}. The template
    # needs shapes only: no initialiser runs (nor compiles) to load a checkpoint.
    template = {"params": jax.eval_shape(Planner(cfg).init_params, jax.random.PRNGKey(0))}
    tree, meta = ckpt.load(checkpoint, template)
    return cfg, tree["params"], dict(meta, checkpoint=str(checkpoint))


def save_planner(path: str | os.PathLike, cfg: PlannerConfig, params, **metadata) -> None:
    """Writes a planner checkpoint that `load_planner` reads (what `train-planner` exports)."""
    meta = {"kind": "planner", "planner_config": config_to_dict(cfg), **metadata}
    ckpt.save(path, {"params": params}, meta)
