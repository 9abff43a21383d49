"""Gate checkpoints of either kind: the checks every gate loader makes, the planner file a
gate was trained over (its sha256), the rules it was trained under and the budgets it chooses
among, the gate file's write and a resumed run's gate check."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import jax

from rtplan.harness import checkpoint as ckpt
from rtplan.planner.configs import RULES, config_from_dict, rules_of, with_budgets
from rtplan.planner.options import Planner

__all__ = [
    "check_gate_file",
    "check_rules",
    "check_same_gate",
    "check_trained_over",
    "file_sha256",
    "save_gate",
    "with_gate_budgets",
]


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


def check_rules(meta: dict, planner_config, source) -> None:
    """Raises `CheckpointError` unless the gate `source` (with metadata `meta`) was trained
    under the rules (`planner.configs.RULES`: committed frames, tree_k) that `planner_config`
    plays: a gate learned when to spend under its own rules, and a planner under others is
    another set of options. The message names the flags (`rtplan eval`'s, `train-gate`'s) of
    its own. A gate file without a readable planner config is left to `check_gate_file`.
    """
    try:
        trained = rules_of(config_from_dict(meta["planner_config"]))
    except (KeyError, TypeError, ValueError):
        return  # no readable planner config: `check_gate_file`'s shape check refuses it
    here = rules_of(planner_config)
    if trained != here:
        flags = " ".join(f"--{name.replace('_', '-')} {trained[name]}" for name in RULES)
        raise ckpt.CheckpointError(
            f"{source} was trained under {_rules_text(trained)}, not {_rules_text(here)}: play "
            f"it under its own rules ({flags})"
        )


def with_gate_budgets(planner_config, meta: dict, source):
    """`planner_config` (a committed game's checkpoint config, under the rules it plays) with the
    budgets the gate `source` (with metadata `meta`) chooses among. A gate trained over more
    budgets than the checkpoint's (`rtplan train-gate --budgets`, or `fit-gate` on labels of
    `counterfactual --budgets`) records them, and every loader of it (`rtplan eval`,
    `--via-services`, the planner service) plays it over those, so the flag is never repeated
    and cannot be forgotten. A gate over the config's own budgets (every shipped one) leaves it
    as it is, and so does a file without readable budgets (`check_gate_file` refuses it).

    Raises:
        CheckpointError: budgets that no `planner.configs.with_budgets` of the config gives
            (not the checkpoint's and larger ones), with its reason.
    """
    recorded = meta.get("budgets")
    ok = isinstance(recorded, list) and all(isinstance(k, int) for k in recorded)
    if not ok or recorded == list(planner_config.budgets):
        return planner_config
    try:
        return with_budgets(planner_config, recorded)
    except ValueError as e:
        raise ckpt.CheckpointError(
            f"{source} picks among budgets {recorded}, which the planner (budgets "
            f"{list(planner_config.budgets)}) cannot play: {e}"
        ) from e


def _rules_text(rules: dict) -> str:
    return ", ".join(f"{name} {rules[name]}" for name in RULES)


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
    check_rules(meta, planner.config, path)
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


def save_gate(path: str | os.PathLike, params, meta: dict) -> None:
    """Writes a gate file: `{"params": params}` (on the host) with the metadata `meta` (its
    `kind`, the gate's `metadata()` and provenance), what every gate loader reads."""
    ckpt.save(path, {"params": jax.device_get(params)}, meta)


def check_same_gate(meta: dict, config, budgets, *, key: str, what: str) -> None:
    """Raises `CheckpointError` unless the checkpoint with metadata `meta` holds the gate
    network `config` (recorded under `key`) over `budgets`: a run resumes only the gate it
    trains. Compared as configs, so a field added since the run saved takes its default.

    Args:
        meta: the checkpoint's metadata (`key` and `budgets` read).
        config: the run's gate config (a dataclass).
        budgets: the run's budgets.
        key: where the gate's metadata records its config (`gate_config`, `clock_gate_config`).
        what: the gate's name in the message ("gate", "clock gate").
    """
    saved = meta.get(key)
    try:
        same = isinstance(saved, dict) and type(config)(**saved) == config
    except (TypeError, ValueError):
        same = False
    if not same or meta.get("budgets") != list(budgets):
        raise ckpt.CheckpointError(
            f"the checkpoint holds a {what} {saved} over budgets {meta.get('budgets')}, but "
            f"this run asks for {dataclasses.asdict(config)} over {budgets}"
        )
