"""gRPC's own cost on this machine: the floor under a planner call, with no game and no search.

Usage: python -m bench.bench_grpc_floor [--calls 500]

A do-nothing Planner servicer (`grpc.aio`, the same proto and message shapes as the planner
service) runs as its own process; a sync client, as `bench.bench_planner_service` uses, times:

- unary: `Health` (one request, one response);
- stream: `Plan` answering two small messages (the decision, then the action), as the service
  streams them;
- stream + hop: the same, with the work on a thread pool and the decision handed back to the
  event loop (`call_soon_threadsafe`) while it runs, as the planner service does.

The three are timed alternately (same machine load); medians and p95 in ms. What
`bench_planner_service` measures over in-process planning, less its packing, unpacking and
search time, cannot go below the last row.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import subprocess
import sys
import time

import grpc

from bench._common import ROOT, median_p95
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc


class _Floor(planner_pb2_grpc.PlannerServicer):
    """Plan answers two messages; with `stream_id` "hop" the work runs on a worker thread."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(2)

    async def Plan(self, request: pb.PlanRequest, context) -> None:
        decision = pb.PlanResponse(decision=pb.Decision(k=1, request_id=request.request_id))
        action = pb.PlanResponse(action=pb.PlannedAction(request_id=request.request_id))
        if request.stream_id != "hop":
            await context.write(decision)
            await context.write(action)
            return
        loop = asyncio.get_running_loop()
        decided = loop.create_future()

        def work() -> None:
            loop.call_soon_threadsafe(decided.set_result, None)

        running = asyncio.ensure_future(loop.run_in_executor(self._pool, work))
        await asyncio.wait((decided, running), return_when=asyncio.FIRST_COMPLETED)
        await context.write(decision)
        await running
        await context.write(action)

    async def Health(self, request, context) -> pb.HealthResponse:
        return pb.HealthResponse(status=pb.HealthResponse.SERVING)


async def _serve() -> None:
    server = grpc.aio.server()
    planner_pb2_grpc.add_PlannerServicer_to_server(_Floor(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


def _time(fn, calls: int) -> tuple[float, float]:
    ms = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - start) * 1e3)
    return median_p95(ms)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return 0

    cmd = [sys.executable, "-m", "bench.bench_grpc_floor", "--serve"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        address = proc.stdout.readline().split()[-1]
        with grpc.insecure_channel(address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            calls = {
                "unary (Health)": lambda: stub.Health(pb.HealthRequest(), timeout=10),
                "stream of 2 (Plan)": lambda: list(stub.Plan(pb.PlanRequest(), timeout=10)),
                "stream of 2 + worker hop": lambda: list(
                    stub.Plan(pb.PlanRequest(stream_id="hop"), timeout=10)
                ),
            }
            for fn in calls.values():  # warm-up
                _time(fn, 50)
            rows = {name: [] for name in calls}
            for _ in range(args.calls):  # alternate, so all see the same background load
                for name, fn in calls.items():
                    rows[name].append(_time(fn, 1)[0])
    finally:
        proc.terminate()
        proc.wait(30)

    print(f"\n## gRPC floor over loopback ({args.calls} calls each, ms)\n")
    print(f"machine: {os.cpu_count()} CPUs, grpcio {grpc.__version__}\n")
    print("| call | median | p95 |")
    print("|---|---|---|")
    for name, ms in rows.items():
        median, p95 = median_p95(ms)
        print(f"| {name} | {median:.2f} | {p95:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
