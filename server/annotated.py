"""Annotated clock-evaluation games (`gate.evaluation.annotate`) as replay files the replay page
shows.

A file is an ordinary replay (`server.replay`, version 2) of the game as the env server would
record it, re-simulated here with the server's own step and checked against the match's states;
its header carries the game's `annotation` (what was picked and why) and each move's frame line
its own (the budget, the gate's probabilities, both clocks, the planner's value, a note).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtplan.gate.evaluation.annotate import (
    AnnotatedGame,
    AnnotatedMove,
    annotate_games,
    games_folder,
)
from rtplan.server import _messages as messages
from rtplan.server._compiled import compiled
from rtplan.server._frame_info import HostInfo
from rtplan.server._records import PlanDecision, Report
from rtplan.server._rules import Provenance
from rtplan.server._runtime import describe_game, init_key, state_digest
from rtplan.server.replay import Recorder, ReplayError

__all__ = ["annotated_name", "write_annotated", "write_annotated_games"]

#: The fps a viewer plays an annotated game at by default (a move every quarter second).
FPS = 4.0


def annotated_name(g: AnnotatedGame) -> str:
    """The file name of an annotated game, e.g. `gate-k32-T1200-g17.jsonl`."""
    return f"gate-{g.opponent}-T{g.t0}-g{g.index}.jsonl"


def _settings(g: AnnotatedGame) -> dict[str, Any]:
    """The session settings that name the two sides as the session list does (player 0 is
    the agent): the gate is the gated planner; a pool opponent the planner at its fixed k,
    the reflex, or (the pool's random option) the planner over every option."""
    opp = g.opponent
    if opp.startswith("k") and opp[1:].isdigit():
        other = ("planner", [int(opp[1:])])
    elif opp == "policy-only":
        other = ("reflex", [])
    else:
        other = ("planner", [0, *g.budgets])
    if g.gate_player == 0:
        agent, ks = "planner", []
        opponent, opponent_k = (other[0], other[1][0]) if len(other[1]) == 1 else (other[0], 0)
    else:
        agent, ks = other
        opponent, opponent_k = "gate", 0
    return {
        "game_id": g.game,
        "seed": g.seed,
        "fps": FPS,
        "agent": agent,
        "ks": ks,
        "fallback": "game",
        "clock": "simulated",
        "record": True,
        "opponent": opponent,
        "opponent_k": opponent_k,
        "max_frames": 0,
        "time_s": 0.0,
        "increment_s": 0.0,
    }


def _move_annotation(g: AnnotatedGame, m: AnnotatedMove, sides: list[str]) -> dict[str, Any]:
    gate = m.mover == g.gate_player
    value_for_gate = m.value if gate else -m.value
    return {
        "side": sides[m.mover],
        "k": m.k,
        "cost": m.cost,
        "clocks_before": list(m.clocks_before),
        "clocks_after": list(m.clocks_after),
        "value": round(m.value, 4),
        "value_for_gate": round(value_for_gate, 4),
        "probabilities": None
        if m.probabilities is None
        else [round(p, 4) for p in m.probabilities],
        "options": ["policy-only", *[f"k{b}" for b in g.budgets]],
        "note": m.note,
        "big": m.note is not None,
    }


def _report(g: AnnotatedGame, m: AnnotatedMove) -> Report:
    gate = m.mover == g.gate_player
    decision = PlanDecision(
        frame=m.frame,
        k=max(m.k, 0),
        gated=gate,
        probabilities=m.probabilities or (),
        value=m.value,
    )
    return Report(
        frame=m.frame,
        action=m.action,
        provenance=Provenance.ON_TIME,
        slack_ms=0.0,
        received_action=m.action,
        source="planned" if m.mover == 0 else "opponent",
        k=m.k if m.k >= 0 else None,
        cost=m.cost,
        latency_ms=None,
        decision=decision,
    )


def write_annotated(path: str | os.PathLike, g: AnnotatedGame, command: str | None = None) -> Path:
    """Writes annotated game `g` as a replay file at `path`, re-simulating it with the env
    server's step (opening moves free, each move charged its cost) and checking each state
    against the match's.

    Args:
        path: the file.
        g: the game.
        command: the command that wrote it, kept in the header's annotation.

    Raises:
        ReplayError: the server's step does not reproduce the match's states.
    """
    path = Path(path)
    game_params, checkpoint = g.game_params, g.planner_checkpoint
    fns = compiled(g.game, tuple(sorted(game_params.items())), None)
    state = fns.set_clock(fns.init(init_key(g.seed)), np.int32(g.t0))
    sides = ["", ""]
    sides[g.gate_player] = "gate"
    sides[1 - g.gate_player] = g.opponent
    spec = describe_game(fns.game, Path(checkpoint), g.budgets, game_params)
    header = {
        "game": g.game,
        "game_params": dict(game_params),
        "seed": g.seed,
        "initial": state_digest(state),
        "session": path.stem,
        "settings": _settings(g),
        "gated": g.gate_player == 0,
        "initial_time": g.t0,
        "checkpoint": checkpoint,
        "spec": spec,
        "created": None,
        "annotation": {
            "title": g.title,
            "sides": sides,
            "cell": g.cell,
            "index": g.index,
            "t0": g.t0,
            "opening_plies": len(g.opening),
            "spend": {
                "share": round(g.pick.share, 4),
                "cost": g.pick.cost,
                "gate_move": g.pick.move,
            },
            "gate_score": g.score,
            "command": command,
        },
    }
    rec = Recorder.of_header(path, header)
    total, frames = 0.0, 0
    try:
        for action in g.opening:
            state, dev = fns.frame(None, state, np.int32(action), np.int32(0), np.int32(0))
            info = HostInfo.from_device(dev)
            report = Report(
                frame=frames,
                action=action,
                provenance=Provenance.ON_TIME,
                slack_ms=0.0,
                received_action=action,
                source="opening",  # the evaluation's random opening: free, no decision
                k=None,
                cost=0,
                latency_ms=None,
            )
            rec.frame(report, state, info)
            frames += 1
        if state_digest(state) != state_digest(g.start):
            raise ReplayError(f"{path}: the server's opening differs from the match's")
        for m in g.moves:
            state, dev = fns.frame(None, state, np.int32(m.action), np.int32(m.cost), np.int32(0))
            info = HostInfo.from_device(dev)
            if state_digest(state) != state_digest(m.state):
                raise ReplayError(
                    f"{path}: frame {m.frame}: the server's step differs from the match's"
                )
            rec.frame(_report(g, m), state, info, _move_annotation(g, m, sides))
            total += info.rewards[0]
            frames += 1
        end = messages.end_message(
            session=path.stem,
            status="finished",
            reason="terminated" if g.finished else "max_frames",
            stats={},
            episode_return=total,
        )
        rec.close(end, frames=frames)
    finally:
        rec.close()
    return path


def write_annotated_games(
    game_id: str,
    *,
    root: str | os.PathLike,
    planner_file: str | os.PathLike,
    gate_file: str | os.PathLike,
    count: int = 3,
    split: str = "eval",
    t0s: Sequence[int] | None = None,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Picks and re-plays the games where the gate spent big (`gate.evaluation.annotate`), writes
    each as an annotated replay under `results/<game>/clock-eval/games/` and a README.md that
    lists them (what each is, why it was picked, the command).

    Returns:
        The replay files written.
    """
    folder = games_folder(root, game_id)
    played = annotate_games(
        game_id,
        planner_file=planner_file,
        gate_file=gate_file,
        root=root,
        count=count,
        split=split,
        t0s=t0s,
        log=log,
    )
    folder.mkdir(parents=True, exist_ok=True)
    paths = [write_annotated(folder / annotated_name(g), g, command) for g in played]
    rows = [
        f"| [{p.name}]({p.name}) | {g.cell.split('/', 1)[1]} | {g.index} | {g.title} |"
        for p, g in zip(paths, played, strict=True)
    ]
    readme = (
        f"""# {game_id}: games where the gate spent big

Re-played from the pre-registered evaluation's cells (`{split}` openings) by

    {command or "rtplan annotate-games --game " + game_id}

A game's spend is the gate's most expensive move (the most simulations), and of those the one
that took the largest share of the clock it had left; the {count} games with the biggest spend
(one per distinct game) were picked from the gate's cells by their options alone, not by their
result. Each re-played game equals its cell's record (score, plies, options, game id).

Each file is a replay (`rtplan.replay`, version 2) whose header says what the game is
(`annotation`) and whose frame lines say, per move, the budget, the gate's probabilities over
its options, both clocks before and after, the planner's value and, on the big spends, a note.
The results page links them to the replay page (`/watch?results_replay=PATH`).

| file | cell | game | what |
|---|---|---|---|
"""
        + "\n".join(rows)
        + "\n"
    )
    (folder / "README.md").write_text(readme)
    for p in paths:
        log(f"wrote {p}")
    return paths
