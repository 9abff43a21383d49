"""Planner service benchmark: gRPC planning vs in-process planning, batch 1, per game.

Usage: python -m bench.bench_planner_service [--games ...] [--calls 200] [--checkpoint-dir DIR]

Each game's shipped checkpoint (`checkpoints/<game>/planner.msgpack`) plans with its smallest
budget: k=1 (32 simulations) in the committed games, the smallest option in the clock games
(Speed Hex 2 simulations, Speed Go 16). The service runs as its own process (`python -m
planner_service`), serving only that budget so start-up compiles one option per game.

- gRPC: the client's wall time for one Plan call, from packing the state (`wire.state_to_proto`)
  to receiving the planned action (decision, then action; sync stub over loopback).
- In-process: the jitted `planner.option` on a device-resident batch-1 state, until its actions
  are on the host (what an agent holding the planner in its own process pays).

The two are timed alternately in one run (same machine load), after warm-up; the table gives
median and p95 in ms and their ratio (target <= 1.1x).

A second table splits the overhead (gRPC median minus in-process median): the client's packing
(`wire.state_to_proto`) and the service's unpacking (`wire.state_from_proto`), both timed here
on the same state; the service's own search time over the in-process one (`search_ms`, which
includes its host transfers); a unary Health round trip (gRPC's floor on this machine); and
the rest (the second streamed message, the worker-thread hop, the decision's own network call
where it has one).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import jax
import numpy as np

from bench._common import ROOT, median_p95
from rtplan import wire
from rtplan.harness.checkpoint import checkpoint_root, planner_path
from rtplan.planner import Planner
from rtplan.planner.store import load_planner, save_planner
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc

GAMES = ("pacman-rt-v0", "snake-rt-v0", "tetris-rt-v0", "speed-hex-v0", "speed-go-v0")


def _serving_dir(src: Path, game_ids, out: Path) -> dict:
    """Copies each checkpoint, restricted to its smallest budget; returns game -> (cfg, params)."""
    loaded = {}
    for game_id in game_ids:
        cfg, params, meta = load_planner(game_id, str(planner_path(src, game_id)))
        k = min(cfg.budgets)
        cfg = dataclasses.replace(cfg, budgets=(k,), simulations=(cfg.sims(k),), gumbel_scale=0.0)
        save_planner(planner_path(out, game_id), cfg, params, source=meta["checkpoint"])
        loaded[game_id] = (cfg, params)
    return loaded


def start_service(checkpoint_dir: Path, game_ids, *flags: str) -> tuple[subprocess.Popen, str]:
    """`python -m rtplan.planner_service` on a free port over `checkpoint_dir`, serving
    `game_ids` (more service `flags` after them); returns the process and its address."""
    cmd = [sys.executable, "-m", "rtplan.planner_service", "--port", "0", "--log-level", "WARNING"]
    cmd += ["--checkpoint-dir", str(checkpoint_dir), "--games", ",".join(game_ids), *flags]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        found = re.search(r"listening on (\S+):(\d+)", line)
        if found:
            return proc, f"{found.group(1)}:{found.group(2)}"
    raise RuntimeError(f"planner service exited with {proc.wait()} before serving")


def bench_game(stub, game_id: str, cfg, params, calls: int, warmup: int) -> dict:
    planner = Planner(cfg)
    k = cfg.budgets[0]
    state = jax.device_get(jax.jit(planner.game.init)(jax.random.PRNGKey(1)))
    batch = jax.device_put(jax.tree.map(lambda x: np.asarray(x)[None], state))
    keys = jax.device_put(np.zeros((1, 2), np.uint32))
    params = jax.device_put(params)
    option = jax.jit(planner.option, static_argnums=3)

    def in_process() -> int:
        return int(jax.device_get(option(params, keys, batch, k).actions)[0, -1])

    request_id = [0]

    def over_grpc() -> tuple[int, float]:
        request_id[0] += 1
        request = pb.PlanRequest(
            game_id=game_id,
            state=wire.state_to_proto(planner.game, state),
            budget=pb.Budget(k=k),
            stream_id=f"bench-{game_id}",
            request_id=request_id[0],
        )
        decision, planned = stub.Plan(request, timeout=10)
        assert decision.decision.k == k
        return planned.action.action, planned.action.search_ms

    msg = wire.state_to_proto(planner.game, state)

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    for _ in range(warmup):
        a, _ = over_grpc()
        b = in_process()
    assert a == b, f"{game_id}: gRPC planned {a}, in-process {b}"
    grpc_ms, local_ms, server_ms = [], [], []
    parts = {"encode": [], "decode": [], "health": []}
    for _ in range(calls):  # alternate, so all see the same background load
        start = time.perf_counter()
        _, search_ms = over_grpc()
        grpc_ms.append((time.perf_counter() - start) * 1e3)
        server_ms.append(search_ms)
        local_ms.append(timed(in_process))
        parts["encode"].append(timed(lambda: wire.state_to_proto(planner.game, state)))
        parts["decode"].append(timed(lambda: wire.state_from_proto(planner.game, msg, host=True)))
        parts["health"].append(timed(lambda: stub.Health(pb.HealthRequest(), timeout=10)))
    return dict(
        k=k,
        sims=cfg.sims(k),
        grpc=median_p95(grpc_ms),
        local=median_p95(local_ms),
        server=median_p95(server_ms),
        **{name: median_p95(ms)[0] for name, ms in parts.items()},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--checkpoint-dir", type=Path, default=checkpoint_root())
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        loaded = _serving_dir(args.checkpoint_dir, args.games, Path(tmp))
        started = time.perf_counter()
        proc, address = start_service(Path(tmp), args.games)
        print(f"service up at {address} in {time.perf_counter() - started:.0f} s", flush=True)
        try:
            channel = grpc.insecure_channel(address)
            stub = planner_pb2_grpc.PlannerStub(channel)
            rows = {g: bench_game(stub, g, *loaded[g], args.calls, args.warmup) for g in args.games}
            channel.close()
        finally:
            proc.terminate()
            proc.wait(30)

    print(f"\n## gRPC vs in-process planning, batch 1 ({args.calls} calls each, ms)\n")
    print(f"machine: {os.cpu_count()} CPUs, device {jax.devices()[0]}\n")
    print(
        "| game | k / sims | in-process median / p95 | gRPC median / p95 | ratio median / p95 "
        "| overhead median ms | server search median |"
    )
    print("|---|---|---|---|---|---|---|")
    for game_id, r in rows.items():
        (lm, lp), (gm, gp), (sm, _) = r["local"], r["grpc"], r["server"]
        print(
            f"| {game_id} | {r['k']} / {r['sims']} | {lm:.2f} / {lp:.2f} | {gm:.2f} / {gp:.2f} "
            f"| {gm / lm:.2f}x / {gp / lp:.2f}x | {gm - lm:.2f} | {sm:.2f} |"
        )
    print("\n## Where the overhead goes (medians, ms)\n")
    print(
        "| game | overhead | client packing | service unpacking | service search over in-process "
        "| unary round trip | rest |"
    )
    print("|---|---|---|---|---|---|---|")
    for game_id, r in rows.items():
        over = r["grpc"][0] - r["local"][0]
        search = r["server"][0] - r["local"][0]
        rest = over - r["encode"] - r["decode"] - search - r["health"]
        print(
            f"| {game_id} | {over:.2f} | {r['encode']:.2f} | {r['decode']:.2f} | {search:.2f} "
            f"| {r['health']:.2f} | {rest:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
