"""Planner-agent sessions one planner service holds in real time, before and after batching.

Usage: python -m bench.bench_capacity [--games snake-rt-v0 tetris-rt-v0] [--fps 10 30]
       [--replicas 1 2] [--sessions 1 2 4 8 16 32] [--seconds 15] [--max-batch 8]
       [--checkpoint-dir DIR] [--csv bench/results/capacity.csv]

Two modes of the planner service, as it was before issue 42 and as it is now:

- `before`: `--max-batch 1 --stream-searches 1`, every search alone at batch 1 and one search
  at a time per session (a session's late search delays its next one);
- `after`: `--max-batch 8` (searches of one game, kind and k batched across sessions at rungs 2,
  4 and 8: `planner_service/_batcher.py`) with the default `--stream-searches 2` (a late
  search runs beside its session's next one: the no-cliff admission).

Both keep `--max-concurrent 2`; the deadline checks (a search that cannot land is never
started, `PlanRequest.frame_clock`) are in the services either way. Per game, each mode's
replicas are started (`rtplan planner-service`, only that game, replica i pinned to core i mod
the cores, as `bench.bench_replicas` does), and one env server (not pinned) per mode and
replica count whose `--planner-address` lists that many of the mode's replicas. Everything
stays up through the game's rows, so the modes are measured alternately (the order flips per
row: both see the same background load).

For each FPS and replica count, N = `--sessions` in turn: N slots each play gated planner-agent
sessions in real time (no k: the service's gate picks each budget; frames tick at the FPS and a
planned action that is not there by its landing frame's deadline is a miss) for `--seconds`
of frames, one session after another (a game that ends before is followed by the next seed),
all N together. Per row: the planned-frame miss rate, misses / landings, where a landing is a
planned action's frame (`planned` on time, `planner_misses` not there by its deadline,
`planner_errors` failed calls, whose landings play the fallback: the sessions' stats), plans/s
(planned actions applied on time per second), the median over sessions of each session's p50
and p95 Plan round trip (decision sent to action received), the gate's mean k and the late
ticks. The largest N below a mode's first N whose miss rate reaches 1% (`--held`) is what
that service holds; a mode's ramp goes on, so both are seen side by side past it, until its
miss rate passes `--stop` (10%) or both have. The machine's load average is recorded with
each row.

Rows go to `bench/results/capacity.csv`; a summary table (held N per mode and its ratio) is
printed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench._common import RESULTS, append_rows, git_commit, utc_now
from rtplan.processes import Child, HTTPStatusError, http_json, stop_all
from rtplan.processes._services import _ENV_BOUND, _PLANNER_BOUND

FIELDS = (
    "date", "commit", "game", "fps", "replicas", "mode", "sessions", "seconds", "load1",
    "episodes", "frames", "decisions", "landings", "planned", "misses", "errors", "miss_pct",
    "fallback_pct", "plans_per_s", "p50_ms", "p95_ms", "mean_k", "late_ticks", "ticks", "held",
)  # fmt: skip
#: The planner service's flags per mode.
MODES = {
    "before": lambda max_batch: ["--max-batch", "1", "--stream-searches", "1"],
    "after": lambda max_batch: ["--max-batch", str(max_batch)],
}
#: Seconds between polls of a live session (the env server keeps only 64 ended ones).
POLL_S = 0.5


def _planner(game: str, mode: str, i: int, max_batch: int, ckpt: list[str]) -> Child:
    argv = [sys.executable, "-m", "rtplan", "planner-service", "--port", "0", "--games", game]
    argv += [*ckpt, *MODES[mode](max_batch)]
    return Child(f"{mode}-{i}", argv, echo=False, cpus=(i % (os.cpu_count() or 1),))


def _env_server(game: str, ports: list[int], sessions: int, ckpt: list[str]) -> Child:
    argv = [
        sys.executable, "-m", "rtplan", "env-server", "--http-port", "0", "--grpc-port", "0",
        "--planner-address", ",".join(f"127.0.0.1:{p}" for p in ports), "--preload", game,
        "--max-sessions", str(sessions), "--batch-warm-rows", str(sessions), *ckpt,
    ]  # fmt: skip
    return Child("env-server", argv, echo=False)


class Stack:
    """One game's services: each mode's replicas and an env server per (mode, replica count)."""

    def __init__(self, game: str, replicas: list[int], sessions: int, max_batch: int, ckpt):
        self.children: list[Child] = []
        self.base: dict[tuple[str, int], str] = {}
        start = time.monotonic()
        try:
            ports: dict[str, list[int]] = {m: [] for m in MODES}
            # Replica 0 of each mode first (each compiles its own executables, or loads them
            # from the compile cache); the other replicas then load what those cached.
            for wave in (range(1), range(1, max(replicas))):
                started = []
                for mode in MODES:
                    for i in wave:
                        child = _planner(game, mode, i, max_batch, ckpt)
                        self.children.append(child)
                        started.append((mode, child))
                for mode, child in started:
                    line = child.wait_for("planner service bound to", 600)
                    ports[mode].append(int(_PLANNER_BOUND.search(line).group(1)))
                for _, child in started:
                    ready = child.wait_for(f"planner service: {game} ready", 1800)
                    print(f"{child.name}: {ready.split(': ', 1)[1]}", flush=True)
            envs = {}
            for mode in MODES:
                for r in replicas:
                    envs[mode, r] = _env_server(game, ports[mode][:r], sessions, ckpt)
                    self.children.append(envs[mode, r])
            for key, env in envs.items():
                line = env.wait_for("rtplan env server:", 600)
                self.base[key] = f"http://127.0.0.1:{_ENV_BOUND.search(line)[1]}"
            # A short gated session on each: the game loaded (its tick batches compiled) and
            # every planner connection made before anything is timed.
            with ThreadPoolExecutor(len(self.base)) as pool:
                list(pool.map(lambda b: _play(b, game, 10.0, 5, seed=10**6), self.base.values()))
        except BaseException:
            self.stop()
            raise
        print(f"{game}: services up in {time.monotonic() - start:.0f} s", flush=True)

    def stop(self) -> None:
        stop_all(self.children[::-1])


def _play(base: str, game: str, fps: float, frames: int, seed: int) -> dict | None:
    """Plays one real-time gated planner session of at most `frames` frames; its final details
    (None if the server refused it or forgot it before it was read)."""
    body = {"game": game, "agent": "planner", "fps": fps, "seed": seed, "max_frames": frames}
    try:
        # A session of a game the server is still loading waits for it (minutes when loaded).
        sid = http_json("POST", f"{base}/v1/sessions", body, timeout=900)["id"]
    except HTTPStatusError:
        return None
    end = time.monotonic() + frames / fps + 120
    while True:
        time.sleep(POLL_S)
        try:
            d = http_json("GET", f"{base}/v1/sessions/{sid}")
        except HTTPStatusError:
            return None
        if d["status"] not in ("waiting", "running") or time.monotonic() > end:
            return d


def measure(base: str, game: str, fps: float, sessions: int, seconds: float) -> dict:
    """N slots of back-to-back sessions, together, each for `seconds` of frames at `fps`."""
    frames = max(1, round(fps * seconds))
    done: list[dict] = []
    lock = threading.Lock()

    def slot(i: int) -> None:
        left, j = frames, 0
        while left > 0:
            d = _play(base, game, fps, left, seed=1000 * i + j)
            j += 1
            if d is None:
                return
            with lock:
                done.append(d)
            left -= max(d["stats"]["frames"], 1)

    start = time.monotonic()
    with ThreadPoolExecutor(sessions) as pool:
        list(pool.map(slot, range(sessions)))
    wall = time.monotonic() - start
    stats = [d["stats"] for d in done]
    total = {
        key: sum(s[key] for s in stats)
        for key in ("frames", "decisions", "planned", "planner_misses", "planner_errors",
                    "fallback", "late_ticks", "ticks")
    }  # fmt: skip
    misses, errors = total["planner_misses"], total["planner_errors"]
    landings = total["planned"] + misses + errors
    ks = [(int(k), n) for s in stats for k, n in s["k_histogram"].items()]
    lat = [s["latency_ms"] for s in stats if s["latency_ms"]["p50"] is not None]
    return {
        "episodes": len(done),
        "frames": total["frames"],
        "decisions": total["decisions"],
        "landings": landings,
        "planned": total["planned"],
        "misses": misses,
        "errors": errors,
        "miss_pct": round(100 * (misses + errors) / max(landings, 1), 3),
        "fallback_pct": round(100 * total["fallback"] / max(total["frames"], 1), 3),
        "plans_per_s": round(total["planned"] / wall, 1),
        "p50_ms": round(statistics.median(x["p50"] for x in lat), 1) if lat else None,
        "p95_ms": round(statistics.median(x["p95"] for x in lat), 1) if lat else None,
        "mean_k": round(sum(k * n for k, n in ks) / max(sum(n for _, n in ks), 1), 2),
        "late_ticks": total["late_ticks"],
        "ticks": total["ticks"],
        "seconds": round(wall, 1),
    }


def ramp(stack: Stack, game: str, fps: float, replicas: int, args, stamp: dict) -> list[dict]:
    """Both modes over N = `args.sessions`, alternately, each until its miss rate passes
    `args.stop`, or until both have missed `args.held` at some N."""
    live = list(MODES)
    rows = []
    for step, n in enumerate(args.sessions):
        for mode in live if step % 2 == 0 else live[::-1]:
            row = measure(stack.base[mode, replicas], game, fps, n, args.seconds)
            row.update(game=game, fps=fps, replicas=replicas, mode=mode, sessions=n)
            row["held"] = row["miss_pct"] < 100 * args.held and row["episodes"] > 0
            row["load1"] = round(os.getloadavg()[0], 2)
            rows.append(row)
            append_rows(args.csv, [{**stamp, **row}], FIELDS)
            print(
                f"| {game} | {fps:g} | {replicas} | {mode} | {n} | {row['miss_pct']:.2f}% | "
                f"{row['plans_per_s']} | {row['p50_ms']} / {row['p95_ms']} | {row['mean_k']} | "
                f"{row['load1']} |",
                flush=True,
            )
        live = [m for m in live if rows_of(rows, m)[-1]["miss_pct"] < 100 * args.stop]
        failed = {r["mode"] for r in rows if not r["held"]}
        if not live or failed == set(MODES):
            break
    return rows


def rows_of(rows: list[dict], mode: str) -> list[dict]:
    return [r for r in rows if r["mode"] == mode]


def held(rows: list[dict], mode: str) -> int:
    """The largest N a mode held before its first failing N (0: not even the first)."""
    best = 0
    for r in rows_of(rows, mode):
        if not r["held"]:
            break
        best = r["sessions"]
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--games", nargs="+", default=["snake-rt-v0", "tetris-rt-v0"])
    p.add_argument("--fps", nargs="+", type=float, default=[10.0, 30.0])
    p.add_argument("--replicas", nargs="+", type=int, default=[1, 2])
    p.add_argument("--sessions", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32])
    p.add_argument("--seconds", type=float, default=15.0, help="frames per slot, in seconds")
    p.add_argument("--max-batch", type=int, default=8, help="the after mode's --max-batch")
    p.add_argument("--held", type=float, default=0.01, help="miss rate a held N stays under")
    p.add_argument("--stop", type=float, default=0.10, help="miss rate that ends a mode's ramp")
    p.add_argument("--checkpoint-dir", type=Path, default=None)
    p.add_argument("--csv", default=str(RESULTS / "capacity.csv"))
    args = p.parse_args(argv)
    ckpt = [] if args.checkpoint_dir is None else ["--checkpoint-dir", str(args.checkpoint_dir)]
    stamp = {"date": utc_now(), "commit": git_commit(short=True)}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()}, commit {stamp['commit']}")
    print("| game | FPS | replicas | mode | N | misses | plans/s | p50 / p95 ms | mean k | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    summary = []
    for game in args.games:
        stack = Stack(game, args.replicas, max(args.sessions), args.max_batch, ckpt)
        try:
            for fps in args.fps:
                for r in args.replicas:
                    rows = ramp(stack, game, fps, r, args, stamp)
                    summary.append((game, fps, r, held(rows, "before"), held(rows, "after")))
        finally:
            stack.stop()
    print("\n| game | FPS | replicas | held before | held after | x |\n|---|---|---|---|---|---|")
    for game, fps, r, b, a in summary:
        ratio = f"{a / b:.1f}x" if b else "-"
        print(f"| {game} | {fps:g} | {r} | {b} | {a} | {ratio} |")
    print(f"\nappended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
