"""`rtplan eval --via-services`: the gate played through the real services against in-process.

Committed games (`committed`): the gate's episodes, frame by frame (actions, k-sequence,
return). Clock games (`clock`): the clock gate (the planner agent, player 0) against the reflex
opponent, ply by ply (movers, moves, charged ticks, the gate's budgets, both clocks after every
ply, the result). One `run` plays either: each kind's module gives its loader (the service's
checks), its in-process reference, its reader of a session's replay, its comparison and its table
(`committed`, `clock`). Sessions are read back over the wire (`GET /v1/replays/NAME`, the env
server's own re-simulation of the file it wrote), never from the server's files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rtplan.harness import checkpoint as ckpt
from rtplan.via_services import clock, committed
from rtplan.via_services.sessions import (
    create_session,
    fetch_replay,
    play_sessions,
    play_through_services,
    report,
    serving_folder,
    table,
)

__all__ = [
    "clock",
    "committed",
    "create_session",
    "fetch_replay",
    "play_sessions",
    "run",
    "serving_folder",
]


def run(
    game_id: str,
    *,
    episodes: int,
    split: str = "eval",
    planner_file: str | None = None,
    gate_file: str | None = None,
    log: Callable = print,
    rules: Mapping[str, object] | None = None,
) -> int:
    """Plays the gate on a split's first `episodes` seeds in process and through the services
    (planner service + env server subprocesses, simulated clock) and compares them.

    `rules`: committed-action games, `committed` and `tree_k` (a None value: the checkpoint's
    own), the rules both play under (`planner.configs.with_rules`; the planner service's flags
    of the same names). Under committed "plan" the sessions follow the service's plans.

    Returns:
        0 when every seed plays identically (committed games: return, actions, k-sequence;
        clock games: movers, moves, charged ticks, budgets, clocks, result), 1 otherwise.

    Raises:
        CheckpointError: no planner or gate file, or one does not load (or the gate was trained
        over another planner). ValueError: too few episodes.
        RuntimeError: a service failed to start or a session failed.
    """
    import functools

    from rtplan import games
    from rtplan.gate.committed.choosers import seeds_of

    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    planner_file = str(ckpt.planner_file(game_id, planner_file))
    gate_file = str(ckpt.gate_file(game_id, gate_file, beside=planner_file))  # it plays the gate
    kind = {games.Kind.COMMITTED: committed, games.Kind.CLOCK: clock}[games.kind_of(game_id)]
    rules = dict(rules or {})
    flags = [f for name, v in rules.items() if v is not None for f in (_flag(name), str(v))]
    if flags and kind is not committed:
        raise ValueError(f"{game_id} is a clock game: it plays under its own rules only")
    # Each file loaded once, with the service's checks, before the services start.
    load = functools.partial(committed.load, rules=rules) if flags else kind.load
    loaded = load(game_id, planner_file, gate_file)
    want, served = play_through_services(
        game_id,
        seeds_of(split, episodes),
        planner_file,
        gate_file,
        reference=functools.partial(kind.in_process, loaded),
        read=kind.served,
        log=log,
        opponent=kind.OPPONENT,
        rules=flags,
        committed=loaded.planner.config.committed,
    )
    rows, problems = kind.compare(want, served)
    identical = kind.identical(game_id, split, rows, served)
    return report(table(rows, kind.COLUMNS), problems, identical, log)


def _flag(name: str) -> str:
    """The command-line flag of a rule (`tree_k` -> `--tree-k`)."""
    return "--" + name.replace("_", "-")
