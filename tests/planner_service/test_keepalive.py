"""The env server's keepalive pings against the planner service's server options: an idle
connection is never sent GOAWAY too_many_pings, and a replica that hangs is dropped within
`wire.KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS`, as docs/services.md says."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time

import grpc

from rtplan.processes import Child
from rtplan.server._planner_channel import open_channel
from rtplan.v1 import planner_pb2, planner_pb2_grpc
from rtplan.wire import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS

#: A real gRPC server with the planner service's options (no engine: nothing to compile),
#: whose Health answers with the caller's address (a new connection is a new client port).
_REPLICA = """
import asyncio
import grpc
from rtplan.planner_service.server import server_options
from rtplan.v1 import planner_pb2, planner_pb2_grpc

class Peers(planner_pb2_grpc.PlannerServicer):
    async def Health(self, request, context):
        serving = planner_pb2.HealthResponse.SERVING
        return planner_pb2.HealthResponse(status=serving, detail=context.peer())

async def main():
    server = grpc.aio.server(options=server_options(max_connection_age_s=600))
    planner_pb2_grpc.add_PlannerServicer_to_server(Peers(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"replica listening on {port}", flush=True)
    await server.wait_for_termination()

asyncio.run(main())
"""

#: Idle seconds with pings only: the server's old 5-minute minimum sent GOAWAY too_many_pings
#: at the third ping (`grpc.http2.max_ping_strikes` 2), ~6 s in; gRPC then doubled the
#: client's ping period.
IDLE_S = 9.0
#: The documented bound on noticing a hung replica: a ping is due at most KEEPALIVE_TIME_MS
#: after the last, and unanswered after KEEPALIVE_TIMEOUT_MS the connection is dropped.
DETECT_S = (KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS) / 1000
#: Slack for a loaded 2-core machine (timers, the poll below).
SLACK_S = 1.0


def test_idle_pings_get_no_goaway_and_a_hung_replica_is_dropped_in_the_documented_time(capfd):
    replica = Child("replica", [sys.executable, "-c", _REPLICA], echo=False)
    try:
        port = int(re.search(r"on (\d+)", replica.wait_for("listening on", 120)).group(1))

        async def run() -> tuple[set[str], list[str], float]:
            channel = open_channel(f"127.0.0.1:{port}")
            stub = planner_pb2_grpc.PlannerStub(channel)
            peers, states = set(), []

            async def health() -> None:
                answer = await stub.Health(planner_pb2.HealthRequest(), timeout=5)
                peers.add(answer.detail)

            async def watch(seconds: float) -> float | None:
                """Polls the channel's state; seconds until it left READY, or None."""
                start = time.monotonic()
                while (elapsed := time.monotonic() - start) < seconds:
                    state = channel.get_state(try_to_connect=False)
                    if state != grpc.ChannelConnectivity.READY:
                        states.append(state.name)
                        return elapsed
                    await asyncio.sleep(0.02)
                return None

            try:
                await health()
                # Idle: only the client's keepalive pings cross the connection.
                left = await watch(IDLE_S)
                await health()  # on the same connection if no GOAWAY came
                replica.proc.send_signal(signal.SIGSTOP)  # hangs, its connection open
                hung = await watch(DETECT_S + 10)
            finally:
                await channel.close()
            assert left is None, f"the idle connection left READY after {left:.1f} s: {states}"
            return peers, states, hung

        peers, states, hung = asyncio.run(run())
    finally:
        replica.kill()
    # One connection all along: a GOAWAY (too_many_pings) would have made the client reconnect,
    # and gRPC core logs the GOAWAY it gets on this process's stderr.
    err = capfd.readouterr().err
    print(f"hung replica dropped after {hung} s (bound {DETECT_S:.0f} s); states {states}")
    assert "too_many_pings" not in err
    assert len(peers) == 1, peers
    assert hung is not None and hung <= DETECT_S + SLACK_S, (hung, states)
