"""Batched searches across sessions: plans/s against batch size, and Plan latency under load with
and without batching, side by side in one run.

Usage: python -m bench.bench_batching [--games snake-rt-v0 tetris-rt-v0] [--clients 1 4 8 16]
    [--seconds 10] [--max-batch 8] [--checkpoint-dir DIR]

Each game's shipped checkpoint plans at its smallest budget (k=1, 32 simulations in the
committed games), so each service compiles one option (at batch 1, or at the rungs 2, 4, 8).

1. Plans/s against batch size: the option executable at each batch size (`CompiledOptions`,
   in this process, states of different sessions), median of `--repeats` rounds that call each
   size in turn; plans/s is the batch over that time.
2. Under load: two planner services as processes, `--max-batch 1` (every search alone at batch
   1, as before) and `--max-batch N`, both at the default `--max-concurrent 2`. For each number
   of clients, each client (a session in a closed loop, as simulated-clock sessions play) sends
   Plan requests one after another for `--seconds`, each from its own state with its own seed;
   a RESOURCE_EXHAUSTED answer is asked again after its retry-after-ms, as the env server does.
   The two services are measured alternately per row (same machine load). A request's latency
   is from its first send to its planned action (retries included).

Rows go to `bench/results/batching.csv`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

from rtplan.jax_setup import use_compile_cache

if __name__ == "__main__":  # a script only: before jax, so the services load what it compiled
    use_compile_cache()

import grpc  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import RESULTS, append_rows, git_commit, median_p95, utc_now  # noqa: E402
from bench.bench_planner_service import start_service  # noqa: E402
from rtplan import wire  # noqa: E402
from rtplan.harness.checkpoint import checkpoint_root, planner_path  # noqa: E402
from rtplan.planner import CompiledOptions, Planner  # noqa: E402
from rtplan.planner.store import load_planner, save_planner  # noqa: E402
from rtplan.planner_service.server import RETRY_AFTER_KEY  # noqa: E402
from rtplan.v1 import planner_pb2 as pb  # noqa: E402
from rtplan.v1 import planner_pb2_grpc  # noqa: E402

GAMES = ("snake-rt-v0", "tetris-rt-v0")
CSV = RESULTS / "batching.csv"


def _serving_dir(src: Path, game_id: str, out: Path):
    """Copies the game's checkpoint restricted to its smallest budget; returns (cfg, params)."""
    cfg, params, meta = load_planner(game_id, str(planner_path(src, game_id)))
    k = min(cfg.budgets)
    cfg = dataclasses.replace(cfg, budgets=(k,), simulations=(cfg.sims(k),), gumbel_scale=0.0)
    save_planner(planner_path(out, game_id), cfg, params, source=meta["checkpoint"])
    return cfg, params


def session_states(planner: Planner, n: int) -> list:
    """n states of different sessions: each its own start and a few random legal moves."""
    step = jax.jit(planner.game.step)
    rng = np.random.default_rng(0)
    states = []
    for i in range(n):
        state = jax.jit(planner.game.init)(jax.random.PRNGKey(1000 + i))
        for _ in range(int(rng.integers(0, 8))):
            legal = np.flatnonzero(np.asarray(state.legal_action_mask))
            nxt = step(state, int(rng.choice(legal)))
            if bool(nxt.done):
                break
            state = nxt
        states.append(jax.device_get(state))
    return states


def plans_per_second(cfg, params, sizes, repeats: int) -> dict[int, tuple[float, float]]:
    """Batch size -> (median ms of one call, plans/s) of the option at that size."""
    planner = Planner(cfg)
    k = cfg.budgets[0]
    options = CompiledOptions(planner, params, ladder=tuple(sizes))
    states = session_states(planner, max(sizes))
    keys = np.stack([np.array([0, i], np.uint32) for i in range(max(sizes))])
    batches = {n: jax.tree.map(lambda *xs: np.stack(xs), *states[:n]) for n in sizes}
    for n in sizes:
        options.option(k, keys[:n], batches[n])  # compiles
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats):  # the sizes in turn: each sees the same background load
        for n in sizes:
            start = time.perf_counter()
            options.option(k, keys[:n], batches[n])
            times[n].append((time.perf_counter() - start) * 1e3)
    return {n: (ms := float(np.median(times[n])), n / ms * 1e3) for n in sizes}


async def _load(address: str, game_id: str, k: int, msgs, seconds: float, tag: str) -> dict:
    """Closed-loop clients, one per state message, for `seconds`: latencies and refusals.
    `tag` makes the stream ids new (a service remembers each stream's newest request id)."""
    latencies: list[float] = []
    refused = 0
    async with grpc.aio.insecure_channel(address) as channel:
        stub = planner_pb2_grpc.PlannerStub(channel)
        end = time.monotonic() + seconds

        async def client(i: int, msg) -> None:
            nonlocal refused
            rid = 0
            while time.monotonic() < end:
                rid += 1
                start = time.perf_counter()
                while True:
                    request = pb.PlanRequest(
                        game_id=game_id,
                        state=msg,
                        budget=pb.Budget(k=k),
                        stream_id=f"{tag}-client-{i}",
                        request_id=rid,
                        seed=i * 7919 + rid,
                    )
                    call = stub.Plan(request, timeout=10)
                    try:
                        answers = [r async for r in call]
                        assert answers[-1].HasField("action")
                        break
                    except grpc.aio.AioRpcError as e:
                        if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                            raise
                        refused += 1
                        meta = dict(e.trailing_metadata() or ())
                        await asyncio.sleep(int(meta.get(RETRY_AFTER_KEY, 1)) / 1e3)
                        rid += 1
                latencies.append((time.perf_counter() - start) * 1e3)

        await asyncio.gather(*(client(i, m) for i, m in enumerate(msgs)))
    p50, p95 = median_p95(latencies)
    return dict(plans=len(latencies), plans_s=len(latencies) / seconds, p50=p50, p95=p95,
                refused=refused)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    parser.add_argument("--clients", nargs="+", type=int, default=[1, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--checkpoint-dir", type=Path, default=checkpoint_root())
    args = parser.parse_args()
    sizes = sorted({1, *(2**i for i in range(1, 8) if 2**i <= args.max_batch), args.max_batch})
    commit, date = git_commit(short=True), utc_now()
    print(f"machine: {os.cpu_count()} CPUs, device {jax.devices()[0]}, commit {commit}\n")
    for game_id in args.games:
        with tempfile.TemporaryDirectory() as tmp:
            cfg, params = _serving_dir(args.checkpoint_dir, game_id, Path(tmp))
            k = cfg.budgets[0]
            rates = plans_per_second(cfg, params, sizes, args.repeats)
            print(f"## {game_id}: k={k} ({cfg.sims(k)} simulations), one call at each batch size\n")
            print("| batch | ms per call | plans/s | x batch 1 |")
            print("|---|---|---|---|")
            for size, (ms, rate) in rates.items():
                print(f"| {size} | {ms:.2f} | {rate:.0f} | {rate / rates[1][1]:.2f}x |")
            rows = [
                dict(
                    date=date,
                    commit=commit,
                    game=game_id,
                    k=k,
                    table="batch",
                    batch=size,
                    ms=round(ms, 3),
                    plans_s=round(rate, 1),
                )  # fmt: skip
                for size, (ms, rate) in rates.items()
            ]
            services = {}
            try:
                for mb in (1, args.max_batch):
                    started = time.perf_counter()
                    services[mb] = start_service(Path(tmp), [game_id], "--max-batch", str(mb))
                    print(f"\nservice --max-batch {mb} up in {time.perf_counter() - started:.0f} s")
                planner = Planner(cfg)
                msgs = [wire.state_to_proto(planner.game, s)
                        for s in session_states(planner, max(args.clients))]  # fmt: skip
                print(f"\n## {game_id}: {args.seconds:.0f} s of closed-loop clients per row\n")
                print("| clients | max-batch | plans/s | p50 ms | p95 ms | refused | x plans/s |")
                print("|---|---|---|---|---|---|---|")
                for n in args.clients:
                    got = {}
                    for mb, (_, address) in services.items():
                        got[mb] = asyncio.run(
                            _load(address, game_id, k, msgs[:n], args.seconds, tag=f"{n}")
                        )
                    for mb, r in got.items():
                        ratio = r["plans_s"] / got[1]["plans_s"]
                        print(
                            f"| {n} | {mb} | {r['plans_s']:.1f} | {r['p50']:.1f} | "
                            f"{r['p95']:.1f} | {r['refused']} | {ratio:.2f}x |",
                            flush=True,
                        )
                        rows.append(
                            dict(
                                date=date,
                                commit=commit,
                                game=game_id,
                                k=k,
                                table="load",
                                clients=n,
                                max_batch=mb,
                                plans_s=round(r["plans_s"], 1),
                                p50_ms=round(r["p50"], 2),
                                p95_ms=round(r["p95"], 2),
                                refused=r["refused"],
                            )  # fmt: skip
                        )
            finally:
                for proc, _ in services.values():
                    proc.terminate()
                    proc.wait(30)
            fields = ["date", "commit", "game", "k", "table", "batch", "ms", "clients"]
            fields += ["max_batch", "plans_s", "p50_ms", "p95_ms", "refused"]
            append_rows(CSV, rows, fields)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
