"""Planner replicas: planning throughput of one env server over one or two planner services.

Usage: python -m bench.bench_replicas [--game snake-rt-v0] [--replicas 1 2] [--sessions 8]
       [--frames 60] [--k 1] [--csv bench/results/replicas.csv]

For each replica count R, R planner services (`rtplan planner-service`, only `--game`, replica i
pinned to core i mod the cores) and one env server whose `--planner-address` lists them all (its
client balances the calls round robin, docs/services.md) are started; once every replica says
SERVING, `--sessions` planner-agent sessions with the simulated clock (each frame waits for its
plan, so the planner's throughput sets the pace) and budget `--k` are created together, and the
wall time until all have ended gives the plans per second. The env server is not pinned.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench._common import RESULTS, ROOT, append_rows, git_commit, utc_now
from bench.bench_sessions import _ended as ended
from rtplan.processes import Child, http_json, stop_all
from rtplan.processes._services import _ENV_BOUND, _PLANNER_BOUND

FIELDS = (
    "date", "commit", "game", "k", "replicas", "sessions", "frames", "plans", "seconds",
    "plans_per_s", "speedup",
)  # fmt: skip


def _serving(port: int, timeout: float = 900.0) -> None:
    end = time.monotonic() + timeout
    argv = [sys.executable, "-m", "rtplan", "health", "--planner", f"127.0.0.1:{port}"]
    while subprocess.run(argv, capture_output=True, cwd=ROOT).returncode != 0:
        if time.monotonic() > end:
            raise TimeoutError(f"the planner at :{port} was not SERVING in {timeout:.0f} s")
        time.sleep(1.0)


def measure(game: str, replicas: int, sessions: int, frames: int, k: int) -> dict:
    cores = os.cpu_count() or 1
    py = [sys.executable, "-m", "rtplan"]
    children: list[Child] = []
    try:
        ports = []
        for i in range(replicas):
            argv = [*py, "planner-service", "--port", "0", "--games", game]
            child = Child(f"planner-{i}", argv, echo=False, cpus=(i % cores,))
            children.append(child)
            ports.append(int(_PLANNER_BOUND.search(child.wait_for("bound to", 300)).group(1)))
        for port in ports:
            _serving(port)
        address = ",".join(f"127.0.0.1:{p}" for p in ports)
        env_argv = [
            *py, "env-server", "--http-port", "0", "--grpc-port", "0", "--planner-address",
            address, "--preload", game, "--max-sessions", str(sessions),
        ]  # fmt: skip
        env = Child("env-server", env_argv, echo=False)
        children.append(env)
        base = f"http://127.0.0.1:{_ENV_BOUND.search(env.wait_for('rtplan env server:', 300))[1]}"
        body = {"game": game, "agent": "planner", "k": k, "clock": "simulated"}
        start = time.monotonic()
        with ThreadPoolExecutor(sessions) as pool:
            ids = list(
                pool.map(
                    lambda s: http_json(
                        "POST", f"{base}/v1/sessions", {**body, "seed": s, "max_frames": frames}
                    )["id"],
                    range(sessions),
                )
            )
            details = list(pool.map(lambda sid: ended(base, sid, 1800.0), ids))
        seconds = time.monotonic() - start
    finally:
        stop_all(children[::-1])
    plans = sum(d["stats"]["planned"] for d in details)
    return {
        "game": game, "k": k, "replicas": replicas, "sessions": sessions, "frames": frames,
        "plans": plans, "seconds": round(seconds, 2), "plans_per_s": round(plans / seconds, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--game", default="snake-rt-v0")
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--k", type=int, default=1)
    p.add_argument("--csv", default=str(RESULTS / "replicas.csv"))
    args = p.parse_args(argv)
    stamp = {"date": utc_now(), "commit": git_commit(short=True)}
    rows = [measure(args.game, r, args.sessions, args.frames, args.k) for r in args.replicas]
    for r in rows:
        r["speedup"] = round(r["plans_per_s"] / rows[0]["plans_per_s"], 2)
    print(f"\n## Planner replicas ({args.game}, k={args.k}, {args.sessions} simulated sessions)\n")
    print("| replicas | plans | seconds | plans / s | speed-up |\n|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['replicas']} | {r['plans']} | {r['seconds']} | {r['plans_per_s']} | "
            f"{r['speedup']:.2f}x |"
        )
    append_rows(args.csv, [{**stamp, **r} for r in rows], FIELDS)
    print(f"\nappended to {args.csv}")


if __name__ == "__main__":
    main()
