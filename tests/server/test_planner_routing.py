"""Planner services by game: an env server given two planner services (`A;B`) lists what both
serve, sends each game's Plan calls to the one that serves it, and refuses a game neither
serves with their answers."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from rtplan.planner_service import BackgroundService, Engine
from rtplan.server import Settings
from rtplan.server._planner_caps import PlannerCapabilities
from rtplan.server._planner_route import open_router
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import free_port, session_ended, write_checkpoints, write_gate, write_planner

SNAKE, HEX, GO = "snake-rt-v0", "speed-hex-v0", "speed-go-v0"
FAST = {"xla_backend_optimization_level": 0}


@pytest.fixture(scope="module")
def two(serve, tmp_path_factory):
    """An env server with Snake, Hex and Go checkpoints over two real planner services (gRPC
    on port 0): the first serves Hex, the second Snake (one budget each); none serves Go."""
    tmp = tmp_path_factory.mktemp("routing")
    root = write_checkpoints(tmp / "env", (SNAKE, HEX, GO))
    services = []
    for game_id in (HEX, SNAKE):
        folder = write_planner(tmp / game_id, game_id, budgets=(2,), simulations=(2,))
        engine = Engine.from_dir(folder, compiler_options=FAST)
        services.append(BackgroundService(engine).start())
    return serve(checkpoint_dir=root, services=services).client, *services


def _answered(service: BackgroundService) -> int:
    with grpc.insecure_channel(service.address) as channel:
        stub = planner_pb2_grpc.PlannerStub(channel)
        return stub.Health(pb.HealthRequest(), timeout=10).plans_answered


def test_the_game_list_merges_what_each_service_serves(two):
    client, hex_service, snake_service = two
    listed = {g["id"]: g["planner"] for g in client.get("/v1/games").json()["games"]}
    assert listed[SNAKE]["available"] and listed[SNAKE]["budgets"] == [2]
    assert listed[HEX]["available"] and listed[HEX]["budgets"] == [2]
    assert not listed[GO]["available"]
    assert listed[GO]["reason"] == (
        f"no planner service serves {GO} ({hex_service.address} serves {HEX}; "
        f"{snake_service.address} serves {SNAKE})"
    )


def test_a_games_plans_go_to_the_service_that_serves_it(two):
    client, hex_service, snake_service = two
    before = _answered(hex_service), _answered(snake_service)
    _play(client, k=2)
    after = _answered(hex_service), _answered(snake_service)
    assert after[0] == before[0]  # the first service named never saw a Snake call
    assert after[1] > before[1]


def test_a_game_no_service_serves_is_refused_with_what_each_serves(two):
    client, hex_service, snake_service = two
    refused = client.post("/v1/sessions", json={"game": GO, "agent": "planner", "k": 2})
    assert refused.status_code == 409
    assert (
        f"no planner service serves {GO} ({hex_service.address} serves {HEX}"
        in (refused.json()["detail"])
    )


@pytest.mark.parametrize(
    ("address", "says"),
    [("127.0.0.1:1;", "empty service"), ("127.0.0.1:1;127.0.0.1:1", "names a service twice")],
)
def test_a_bad_list_of_services_is_named(address, says):
    with pytest.raises(ValueError, match=says):
        Settings(planner_address=address)


@pytest.fixture(scope="module")
def split(serve, tmp_path_factory):
    """An env server over two real planner services of Snake with a gate: the first serves it
    gated only (as the demo's showcase service does), the second all of it."""
    tmp = tmp_path_factory.mktemp("split")
    root = write_checkpoints(tmp / "env", (SNAKE,))
    services = []
    for name, gated_only in (("gated", True), ("all", False)):
        folder = write_planner(tmp / name, SNAKE, budgets=(2,), simulations=(2,))
        write_gate(folder, SNAKE)
        engine = Engine.from_dir(folder, compiler_options=FAST, gated_only=gated_only)
        services.append(BackgroundService(engine).start())
    return serve(checkpoint_dir=root, services=services).client, *services


def _play(client, **body) -> dict:
    body = {"game": SNAKE, "agent": "planner", "fps": 30.0, "max_frames": 12, **body}
    created = client.post("/v1/sessions", json={**body, "clock": "simulated"})
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    info = session_ended(client, sid)
    assert info["reason"] == "max_frames", info
    return info


def test_a_games_gated_and_forced_calls_go_where_each_is_served(split):
    client, gated, full = split
    listed = {g["id"]: g["planner"] for g in client.get("/v1/games").json()["games"]}
    assert listed[SNAKE]["available"] and listed[SNAKE]["gate"]
    before = _answered(gated), _answered(full)
    _play(client)  # gated: the gate picks k
    middle = _answered(gated), _answered(full)
    assert middle[0] > before[0] and middle[1] == before[1]
    _play(client, k=2)
    after = _answered(gated), _answered(full)
    assert after[0] == middle[0] and after[1] > middle[1]


def test_a_service_that_does_not_answer_is_named_and_the_others_still_play(two):
    _, hex_service, _ = two
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there

    async def scenario():
        router, channels = open_router(f"{dead};{hex_service.address}")
        try:
            caps = PlannerCapabilities(router, "both")
            first = await caps.get()
            assert first.error is None and first.refusal(HEX, k=2) is None
            assert router.address_of(HEX) == hex_service.address
            why = first.refusal(SNAKE, k=2)
            assert why.startswith(f"no planner service serves {SNAKE} ({dead} did not answer")
            assert (await caps.get()) is not first  # asked again: one service is missing
        finally:
            for channel in channels:
                await channel.close()

    asyncio.run(scenario())
