"""What both comparisons share: a serving folder, the services started over it with the
in-process reference computed beside them, sessions played to their end, and the report."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtplan.processes import Place, Placement, http_json, services

__all__ = [
    "Loaded",
    "at",
    "create_session",
    "fetch_replay",
    "first_difference",
    "play_sessions",
    "play_through_services",
    "played_frames",
    "report",
    "serving_folder",
    "table",
]

#: Sessions the env server plays at once (its default `max_sessions` is 16).
PARALLEL = 4
#: A session whose frame count stands still this long has stalled (one search of the largest
#: budget on a loaded CPU takes well under a second).
STALL_S = 300.0
#: Session creations tried while the planner service does not answer the gate query.
CREATE_TRIES = 5
#: Seconds the env server may take to re-simulate one replay (`GET /v1/replays/NAME`).
REPLAY_TIMEOUT_S = 600.0


@dataclasses.dataclass(frozen=True)
class Loaded:
    """A planner and its gate, each loaded once, with the planner service's own checks (the
    gate's loader over this planner file): what the in-process reference plays."""

    planner: Any  # planner.options.Planner
    planner_params: Any
    gate: Any  # gate.committed.policy.Gate or gate.clock.gate.ClockGate
    gate_params: Any


def serving_folder(tmp: Path, game_id: str, planner_file: str, gate_file: str) -> Path:
    """A checkpoints folder under `tmp` that holds exactly these two files where the services
    read them (`<dir>/<game>/{planner,gate}.msgpack`); returns it."""
    from rtplan.harness.checkpoint import gate_path, planner_path

    root = Path(tmp) / "checkpoints"
    (root / game_id).mkdir(parents=True)
    shutil.copyfile(planner_file, planner_path(root, game_id))
    shutil.copyfile(gate_file, gate_path(root, game_id))
    return root


def create_session(http: str, body: dict, key: str | None = None) -> str:
    """Creates a session (`key`: a key of the env server, where it has keys); retries while
    the env server cannot reach the planner service yet.

    A gated session asks the planner service for its gate first; on a loaded machine a fresh
    connection can time out (UNAVAILABLE) although the service is up, so try a few times.
    """
    for attempt in range(CREATE_TRIES):
        try:
            return http_json("POST", f"{http}/v1/sessions", body, key)["id"]
        except RuntimeError as e:
            if "UNAVAILABLE" not in str(e) or attempt == CREATE_TRIES - 1:
                raise
            time.sleep(2.0)
    raise AssertionError("unreachable")


def fetch_replay(http: str, info: dict) -> dict:
    """A finished session's replay as the env server at `http` re-simulates it from its file
    (`GET /v1/replays/NAME`): the header, and the frame messages a live viewer got."""
    name = Path(info["replay"]).name
    return http_json("GET", f"{http}/v1/replays/{name}", timeout=REPLAY_TIMEOUT_S)


def played_frames(index: dict) -> list[dict]:
    """One row per played frame of a replay (`fetch_replay`): the frame's report as the viewer
    shows it (`action`, `k`, `cost`, `answer_source`, ...: frame message n + 1 carries the
    report of frame n), with `reward`, the agent's reward at that frame, and `clocks`, both
    players' ticks after it."""
    frames = index["frames"]
    return [
        {
            **msg["previous"],
            "reward": msg["episode_return"] - before["episode_return"],
            "clocks": msg["clocks"],
        }
        for before, msg in zip(frames, frames[1:])
    ]


def play_sessions(
    http: str,
    game_id: str,
    seeds: np.ndarray,
    log: Callable,
    *,
    k: int | None = None,
    max_frames: int = 0,
    opponent: str | None = None,
    committed: str = "reflex",
    key: str | None = None,
) -> list[dict]:
    """One simulated-clock planner-agent session per seed, recorded, to the episode's end (or
    `max_frames`), `PARALLEL` at a time; the gate picks each option's k unless `k` forces one.
    Clock games: `opponent` is the built-in opponent (e.g. "reflex"). `committed`: what the
    sessions' committed frames play ("plan": the planner service's plans, which it must play).
    `key`: a key of the env server, where it has keys (`create_session`).

    Returns:
        Each session's final details (`GET /v1/sessions/ID`: episode_return, frame, reason,
        stats, replay), in the order of `seeds`.

    Raises:
        RuntimeError: a session was refused, stalled, failed or had planner errors.
    """
    ended: dict[int, dict] = {}
    pending = [int(s) for s in seeds]
    live: dict[str, tuple[int, int, float]] = {}  # id -> (seed, frame, when it last moved)
    while pending or live:
        while pending and len(live) < PARALLEL:
            seed = pending.pop(0)
            body = {
                "game": game_id,
                "agent": "planner",  # no k: the planner service's gate picks each option's k
                "clock": "simulated",
                "seed": seed,
                "record": True,
                "max_frames": max_frames,
                **({} if k is None else {"k": k}),
                **({} if opponent is None else {"opponent": opponent}),
                **({} if committed == "reflex" else {"committed": committed}),
            }
            sid = create_session(http, body, key)
            if k is None and not http_json("GET", f"{http}/v1/sessions/{sid}")["gated"]:
                raise RuntimeError(f"session {sid} (seed {seed}) does not play the gate")
            live[sid] = (seed, -1, time.monotonic())
        time.sleep(0.1)
        for sid, (seed, frame, moved) in list(live.items()):
            info = http_json("GET", f"{http}/v1/sessions/{sid}")
            if info["status"] in ("waiting", "running"):
                if info["frame"] != frame:
                    live[sid] = (seed, info["frame"], time.monotonic())
                elif time.monotonic() - moved > STALL_S:
                    raise RuntimeError(f"session {sid} (seed {seed}) stalled at frame {frame}")
                continue
            del live[sid]
            if info["status"] != "finished" or info["stats"].get("planner_errors"):
                raise RuntimeError(
                    f"session {sid} (seed {seed}) ended {info['status']}: {info['reason']} "
                    f"(stats {info['stats']})"
                )
            ended[seed] = info
            log(f"seed {seed}: {info['frame']} frames, {info['reason']}")
    return [ended[int(s)] for s in seeds]


def play_through_services(
    game_id: str,
    seeds: np.ndarray,
    planner_file: str,
    gate_file: str,
    *,
    reference: Callable[[np.ndarray], Any],
    read: Callable[[list[dict], dict, int], Any],
    log: Callable,
    opponent: str | None = None,
    rules: Sequence[str] = (),
    committed: str = "reflex",
) -> tuple[Any, list]:
    """Plays `seeds` in process (`reference(seeds)`) and as
    simulated-clock sessions of the planner service and env server over these two files.

    `rules`: the planner service's flags of the rules the reference plays under (`--committed`,
    `--tree-k`); `committed`: what the sessions' committed frames play (`play_sessions`).

    The reference compiles in a thread while the services start and compile theirs; sessions
    start once it is done, so its compile does not slow them.

    Each session is read back over the wire, as the env server re-simulates its replay
    (`fetch_replay`), while the services still run.

    Returns:
        the reference's result and `read(played_frames(replay), info, seed)` of each finished
        session, in seed order.
    """
    with tempfile.TemporaryDirectory(prefix="rtplan-via-services-") as tmp:
        root = serving_folder(Path(tmp), game_id, planner_file, gate_file)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(reference, seeds)
            log(f"starting the planner service and env server over {planner_file}, {gate_file}")
            with services(
                game_id,
                echo=False,
                checkpoint_dir=root,
                record_dir=Path(tmp) / "replays",
                placement=Placement(planner=Place(args=tuple(rules))),
            ) as addr:
                want = pending.result()
                http = addr["http"]
                ended = play_sessions(
                    http, game_id, seeds, log, opponent=opponent, committed=committed
                )
                return want, [
                    read(played_frames(fetch_replay(http, info)), info, int(s))
                    for info, s in zip(ended, seeds, strict=True)
                ]


def first_difference(a: np.ndarray, b: np.ndarray) -> int | None:
    """The first index where two sequences differ (a length difference counts), else None."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    if len(diff):
        return int(diff[0])
    return None if len(a) == len(b) else n


def at(a: np.ndarray, i: int) -> int | str:
    """`a[i]` for a mismatch line, or that the sequence ended before `i`."""
    return int(a[i]) if i < len(a) else "none (the episode is over)"


def table(rows: list[dict], columns: Sequence[tuple[str, str, int]]) -> str:
    """The per-seed table: one (header, row key, width) per column; a bool reads yes / NO."""

    def cell(v) -> str:
        if isinstance(v, bool):
            return "yes" if v else "NO"
        return f"{v:g}" if isinstance(v, float) else str(v)

    lines = [" ".join(f"{h:>{w}}" for h, _, w in columns)]
    lines += [" ".join(f"{cell(r[k]):>{w}}" for _, k, w in columns) for r in rows]
    return "\n".join(lines)


def report(table: str, problems: Sequence[str], identical: str, log: Callable) -> int:
    """Logs the per-seed table and each mismatch; 1 when there is one, else logs `identical`
    and returns 0."""
    log(table)
    for line in problems:
        log(f"MISMATCH {line}")
    if problems:
        return 1
    log(identical)
    return 0
