"""The arena's cost: ranked episodes per hour per env server, and its overhead per frame against
a plain session, measured side by side.

Usage: python -m bench.bench_arena [--game snake-rt-v0] [--seed-set ranked-v1]
       [--concurrent 1 4 8] [--rounds 2] [--csv bench/results/arena.csv]

One env server (no planner service) and one arena over it (a SQLite file in a temp folder, the
`ranked-v1` seed set) run as processes. For each number C of concurrent agents and each round,
two conditions play in turn (plain first in even rounds, ranked first in odd ones, so drift hits
both alike): **plain**, C sessions created directly on the env server (an outside agent's
session, recorded, at 9 FPS (the standard tier) for the seed set's frames per episode: what
any agent of the Env API gets) and
**ranked**, C agents each playing one episode of its own ranked run through the arena (the same
session settings, sealed, and the arena's watcher reading it every 0.5 s). Every agent answers
each frame at once with its first legal action, on a thread of this process.

Per condition it reports the frames, the frames that missed their deadline (late + fallback),
the env server's late ticks and its mean tick lag (ms), the agents' slack (median and p5, ms),
and for ranked runs the hand-out: from `POST /v1/runs/{id}/episodes` to the Handshake (ms).
The arena's overhead per frame is ranked's mean tick lag minus plain's (target < 1 ms, and no
more missed frames). Episodes per hour per env server: the largest C with no missed frame,
times 3600 / (frames / fps + hand-out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench._common import RESULTS, append_rows, git_commit, utc_now
from rtplan.arena import ranked
from rtplan.client import EnvClient
from rtplan.processes import http_json

FIELDS = (
    "date", "commit", "game", "fps", "frames", "concurrent", "round", "condition", "played",
    "missed", "late_ticks", "mean_tick_lag_ms", "slack_p50_ms", "slack_p5_ms", "handout_ms",
)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _process(cmd: list[str], ready: str) -> Iterator[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if ready not in line:
            raise RuntimeError(f"{cmd[3]} did not start: {line!r}")
        yield line
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _play(grpc: str, session_id: str, token: str) -> list[float]:
    """Joins a session and answers every frame at once; the slack of each judged answer."""
    slack = []
    with EnvClient(grpc) as client, client.play(session_id=session_id, token=token) as episode:
        for frame in episode:
            if frame.previous is not None and frame.previous.provenance == "on_time":
                slack.append(frame.previous.slack_ms)
            if frame.done:
                break
            legal = [i for i, ok in enumerate(frame.legal_action_mask) if ok]
            episode.act(frame.frame, legal[0])
    return slack


def _ended(env: str, sid: str) -> dict:
    while (d := http_json("GET", f"{env}/v1/sessions/{sid}"))["status"] in ("waiting", "running"):
        time.sleep(0.2)
    return d


def _plain(env: str, grpc: str, args, seed: int) -> tuple[dict, list[float], float]:
    body = {"game": args.game, "seed": seed, "fps": args.fps, "record": True}
    created = http_json("POST", f"{env}/v1/sessions", {**body, "max_frames": args.frames})
    slack = _play(grpc, created["id"], created["token"])
    return _ended(env, created["id"]), slack, 0.0


def _ranked(env: str, arena: str, args, name: str) -> tuple[dict, list[float], float]:
    token = http_json("POST", f"{arena}/v1/agents", {"name": name, "version": "1"})["token"]
    run = http_json("POST", f"{arena}/v1/runs", {"game": args.game, "tier": "standard"}, token)
    start = time.monotonic()
    given = http_json("POST", f"{arena}/v1/runs/{run['id']}/episodes", None, token)
    handout = (time.monotonic() - start) * 1e3
    slack = _play(given["env"]["grpc"], given["session_id"], given["session_token"])
    return _ended(env, given["session_id"]), slack, handout


def _condition(run_one, c: int) -> dict:
    results: list = [None] * c
    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, run_one(i))) for i in range(c)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = [d["stats"] for d, _, _ in results]
    slack = sorted(s for _, sl, _ in results for s in sl)
    frames = sum(s["frames"] for s in stats)
    return {
        "played": frames,
        "missed": sum(s["late"] + s["fallback"] for s in stats),
        "late_ticks": sum(s["late_ticks"] for s in stats),
        "mean_tick_lag_ms": round(
            sum(s["mean_tick_lag_ms"] * s["ticks"] for s in stats)
            / max(1, sum(s["ticks"] for s in stats)),
            3,
        ),
        "slack_p50_ms": round(statistics.median(slack), 2) if slack else None,
        "slack_p5_ms": round(slack[len(slack) // 20], 2) if slack else None,
        "handout_ms": round(statistics.mean(h for _, _, h in results), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="snake-rt-v0")
    parser.add_argument("--seed-set", default="ranked-v1", choices=sorted(ranked.SEED_SETS))
    parser.add_argument("--concurrent", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--csv", type=Path, default=RESULTS / "arena.csv")
    args = parser.parse_args()
    args.fps = ranked.TIERS["standard"].fps
    args.frames = ranked.SEED_SETS[args.seed_set].max_frames
    py = [sys.executable, "-m", "rtplan"]
    with tempfile.TemporaryDirectory() as tmp:
        env_cmd = [*py, "env-server", "--http-port", "0", "--grpc-port", "0", "--max-sessions",
                   str(2 * max(args.concurrent) + 2), "--record-dir", f"{tmp}/replays",
                   "--log-level", "warning"]  # fmt: skip
        with _process(env_cmd, "rtplan env server") as line:
            env = "http://127.0.0.1:" + line.split("http on 127.0.0.1:")[1].split()[0]
            grpc = "127.0.0.1:" + line.split("gRPC Env API on 127.0.0.1:")[1].split()[0]
            http_json("POST", f"{env}/v1/sessions", {"game": args.game, "agent": "reflex",
                      "fps": 50.0, "max_frames": 1})  # fmt: skip  # compiled before timing
            port = _free_port()
            arena_cmd = [*py, "arena", "serve", "--port", str(port), "--env", env, "--database",
                         f"{tmp}/arena.db", "--seed-set", args.seed_set,
                         "--rate-registrations", "10000/hour",
                         "--log-level", "warning"]  # fmt: skip
            with _process(arena_cmd, "rtplan arena"):
                arena = f"http://127.0.0.1:{port}"
                rows = []
                for c in args.concurrent:
                    for r in range(args.rounds):
                        order = ["plain", "ranked"] if r % 2 == 0 else ["ranked", "plain"]
                        for condition in order:
                            if condition == "plain":
                                one = lambda i, c=c, r=r: _plain(env, grpc, args, 3_000_000 + i)  # noqa: E731
                            else:
                                one = lambda i, c=c, r=r: _ranked(env, arena, args, f"b{c}-{r}-{i}")  # noqa: E731
                            got = _condition(one, c)
                            rows.append({"date": utc_now(), "commit": git_commit(short=True),
                                         "game": args.game, "fps": args.fps,
                                         "frames": args.frames, "concurrent": c, "round": r,
                                         "condition": condition, **got})  # fmt: skip
                            print(json.dumps(rows[-1]), flush=True)
    append_rows(args.csv, rows, FIELDS)
    _summary(rows, args)


def _summary(rows: list[dict], args) -> None:
    print(f"\n{args.game} at {args.fps:g} FPS, {args.frames} frames an episode")
    print("C   plain lag ms  ranked lag ms  overhead ms/frame  missed plain/ranked  handout ms")
    held = 0
    handouts = []
    for c in args.concurrent:
        p = [r for r in rows if r["concurrent"] == c and r["condition"] == "plain"]
        k = [r for r in rows if r["concurrent"] == c and r["condition"] == "ranked"]
        lag_p = statistics.mean(r["mean_tick_lag_ms"] for r in p)
        lag_k = statistics.mean(r["mean_tick_lag_ms"] for r in k)
        missed_p, missed_k = sum(r["missed"] for r in p), sum(r["missed"] for r in k)
        handout = statistics.mean(r["handout_ms"] for r in k)
        handouts.append(handout)
        print(f"{c:<3} {lag_p:>12.3f}  {lag_k:>13.3f}  {lag_k - lag_p:>17.3f}  "
              f"{missed_p:>9}/{missed_k:<9}  {handout:>10.1f}")  # fmt: skip
        if missed_k == 0:
            held = c
    episode_s = args.frames / args.fps + statistics.mean(handouts) / 1e3
    print(f"episodes per hour per env server (C={held} held): {held * 3600 / episode_s:.0f}")


if __name__ == "__main__":
    main()
