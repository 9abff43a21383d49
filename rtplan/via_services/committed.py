"""Committed games through the services: the gate's episodes frame by frame (actions,
k-sequence, return) against `gate.committed.choosers.play` in process."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from rtplan.via_services.sessions import Loaded, at, first_difference

__all__ = [
    "COLUMNS",
    "OPPONENT",
    "Served",
    "compare",
    "identical",
    "in_process",
    "load",
    "served",
]

#: The sessions' opponent: none (one-player games).
OPPONENT = None


@dataclasses.dataclass
class Served:
    """What one services session played (its replay, read back over the wire)."""

    seed: int
    returns: float  # sum of the frames' rewards
    frames: int
    actions: np.ndarray  # [frames] the action applied at each frame
    ks: np.ndarray  # [decisions] the k of each option, in order (-1: no decision)
    decision_frames: np.ndarray  # [decisions] the first frame of each option
    reason: str  # why the session ended ("terminated" or "truncated" at the horizon)


def served(frames: list[dict], info: dict, seed: int) -> Served:
    """What a finished session played (`played_frames` of its replay, as the env server
    re-simulates it), cut into options by the k each frame records, and checked against the
    return the session reported.

    An option of budget k covers k frames (k - 1 reflex frames, then the planned one), every
    one recording k; the last option may be cut short by the episode's end.

    Raises:
        RuntimeError: the frames' rewards do not sum to the session's return.
    """
    ks, starts, f = [], [], 0
    while f < len(frames):
        k = frames[f]["k"]
        ks.append(-1 if k is None else int(k))
        starts.append(f)
        f += max(1, k or 1)  # no decision (a miss) ends the option at its first frame
    returns = float(sum(x["reward"] for x in frames))
    if abs(returns - float(info["episode_return"])) > 1e-6:
        raise RuntimeError(
            f"session {info['id']}: replay rewards sum to {returns}, the session "
            f"reports {info['episode_return']}"
        )
    return Served(
        seed=seed,
        returns=returns,
        frames=len(frames),
        actions=np.array([x["action"] for x in frames], np.int64),
        ks=np.array(ks, np.int64),
        decision_frames=np.array(starts, np.int64),
        reason=info["reason"],
    )


def compare(episodes, served: list[Served]) -> tuple[list[dict], list[str]]:
    """Compares in-process episodes (`gate.committed.choosers.Episodes` with actions) with the
    sessions.

    Returns:
        one row per seed (returns, frames, identical actions / k-sequence) and the
        mismatches, one line each naming the first differing frame.
    """
    rows, problems = [], []
    for i, s in enumerate(served):
        seed = int(episodes.seeds[i])
        acts, ks = episodes.actions[i], episodes.ks[i]
        frame = first_difference(acts, s.actions)
        decision = first_difference(ks, s.ks)
        same_return = abs(float(episodes.returns[i]) - s.returns) <= 1e-6
        rows.append(
            {
                "seed": seed,
                "return_in_process": float(episodes.returns[i]),
                "return_services": s.returns,
                "frames_in_process": int(episodes.frames[i]),
                "frames_services": s.frames,
                "actions": frame is None,
                "ks": decision is None,
            }
        )
        if frame is not None:
            problems.append(
                f"seed {seed}: first differing action at frame {frame}: in-process "
                f"{at(acts, frame)}, services {at(s.actions, frame)}"
            )
        if decision is not None:
            where = episodes.decision_frames[i]
            first = where[decision] if decision < len(where) else s.decision_frames[decision]
            problems.append(
                f"seed {seed}: first differing k at decision {decision} (frame {int(first)}): "
                f"in-process k={at(ks, decision)}, services k={at(s.ks, decision)}"
            )
        if not same_return or int(episodes.frames[i]) != s.frames:
            problems.append(
                f"seed {seed}: in-process return {float(episodes.returns[i]):g} over "
                f"{int(episodes.frames[i])} frames, services {s.returns:g} over {s.frames}"
            )
    return rows, problems


#: The per-seed table's columns: (header, row key, width).
COLUMNS = (
    ("seed", "seed", 9),
    ("return in-process", "return_in_process", 17),
    ("services", "return_services", 9),
    ("frames", "frames_in_process", 7),
    ("services", "frames_services", 8),
    ("actions", "actions", 8),
    ("k-seq", "ks", 6),
)


def load(
    game_id: str, planner_file: str, gate_file: str, rules: Mapping[str, Any] | None = None
) -> Loaded:
    """The planner and the gate, loaded once: `load_gate` over this planner file makes the
    planner service's checks. `rules`: the planner's rules of play (`committed`, `tree_k`; a
    None value keeps the checkpoint's), as the planner service's flags of the same name. The
    planner plays the budgets the gate's file records, as the planner service does
    (`gate.files.with_gate_budgets`).

    Raises:
        harness.checkpoint.CheckpointError: a file does not load, or the gate is not this
            planner's (or was trained under other rules).
        ValueError: rules the planner cannot play under (committed "plan" under tree_k 0).
    """
    from rtplan.gate.committed.policy import load_gate
    from rtplan.gate.files import with_gate_budgets
    from rtplan.harness import checkpoint as ckpt
    from rtplan.planner.configs import with_rules
    from rtplan.planner.options import Planner
    from rtplan.planner.store import load_planner

    pcfg, pparams, _ = load_planner(game_id, planner_file)
    pcfg = with_rules(pcfg, **(rules or {}), plan_needs_tree=True)
    pcfg = with_gate_budgets(pcfg, ckpt.load_metadata(gate_file), gate_file)
    gate, gparams, _ = load_gate(gate_file, Planner(pcfg), planner_file=planner_file)
    return Loaded(gate.planner, pparams, gate, gparams)


def in_process(loaded: Loaded, seeds: np.ndarray):
    """`gate.committed.choosers.play` of the deployed gate (argmax), recording every frame's
    action."""
    from rtplan.gate.committed.choosers import gate_chooser, play

    gate, pparams, gparams = loaded.gate, loaded.planner_params, loaded.gate_params
    choose = gate_chooser(gate, gparams, pparams)
    return play(
        gate.runner(len(seeds)),
        pparams,
        seeds,
        choose,
        record_actions=True,
        future_params=gate.future_params(gparams),
    )


def identical(game_id: str, split: str, rows: list[dict], served: list[Served]) -> str:
    """The line that says every seed played identically."""
    return (
        f"{game_id}: {len(rows)} {split} seeds identical in process and through the services "
        f"(returns, {sum(r['frames_services'] for r in rows)} frame actions, "
        f"{sum(len(s.ks) for s in served)} gate decisions)"
    )
