"""Truthful capabilities: the env server asks the planner service what it serves (games, budgets,
gates), lists it in GET /v1/games, and refuses (409, before the session starts) every planner
path it cannot play: the planner agent at a k, gated, and the planner opponent."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from rtplan.planner_service import BackgroundService, Engine
from rtplan.server._config import SessionConfig
from rtplan.server._planner_caps import (
    COMPILING_CACHE_S,
    FRESH_WAIT_S,
    Capabilities,
    PlannerCapabilities,
    ServedGame,
)
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import HeldCompile, write_checkpoints, write_gate, write_planner

SNAKE, HEX = "snake-rt-v0", "speed-hex-v0"


@pytest.fixture(scope="module")
def partial(serve, tmp_path_factory):
    """An env server with Snake and Hex checkpoints (Hex budgets 2 and 4) whose real planner
    service (gRPC on port 0, compiled fast: a game still compiling is refused as such) serves
    Hex at k=2 only."""
    tmp = tmp_path_factory.mktemp("caps")
    root = write_checkpoints(tmp / "env", (SNAKE, HEX))
    planner_root = write_planner(tmp / "planner", HEX, budgets=(2,), simulations=(2,))
    fast = {"xla_backend_optimization_level": 0}
    service = BackgroundService(Engine.from_dir(planner_root, compiler_options=fast)).start()
    return serve(checkpoint_dir=root, services=(service,)).client, service


def test_the_listing_rpc_says_what_the_service_loaded(partial):
    _, service = partial
    with grpc.insecure_channel(service.address) as channel:
        stub = planner_pb2_grpc.PlannerStub(channel)
        (listed,) = stub.ListGames(pb.ListPlannerGamesRequest(), timeout=10).games
    assert (listed.game_id, list(listed.budgets), listed.gate) == (HEX, [2], False)
    assert listed.checkpoint.endswith(f"{HEX}/planner.msgpack")


def test_the_game_list_says_what_the_planner_can_play(partial):
    client, service = partial
    listed = {g["id"]: g for g in client.get("/v1/games").json()["games"]}
    assert listed[HEX]["budgets"] == [2, 4]  # the env server's checkpoint
    assert listed[HEX]["planner"] == {
        "available": True,
        "compiling": False,
        "budgets": [2],
        "gate": False,
        "gate_compiling": False,
        "gate_reason": f"the planner service at {service.address} has no gate for {HEX}",
        "clock_gate": False,
        "committed": "reflex",
        "reason": "",
    }
    snake = listed[SNAKE]["planner"]
    assert not snake["available"] and snake["budgets"] == [] and not snake["gate"]
    assert snake["reason"] == (
        f"the planner service at {service.address} does not serve {SNAKE} (it serves {HEX})"
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"game": SNAKE, "agent": "planner", "k": 2}, f"does not serve {SNAKE}"),
        ({"game": SNAKE, "agent": "planner"}, f"does not serve {SNAKE}"),
        ({"game": HEX, "agent": "planner", "k": 4}, f"does not plan {HEX} at k=4"),
        ({"game": HEX, "agent": "planner", "k": [2, 4]}, "the planner agent at k=4 cannot play"),
        ({"game": HEX, "agent": "planner"}, f"has no gate for {HEX}; pass k"),
        ({"game": HEX, "agent": "reflex", "opponent_k": 4}, "the planner opponent at k=4"),
        (
            {"game": HEX, "agent": "human", "opponent": "planner", "opponent_k": 4},
            "its budgets: [2]",
        ),
    ],
)
def test_what_the_planner_cannot_play_is_refused_before_it_starts(partial, body, says):
    client, _ = partial
    r = client.post("/v1/sessions", json=body)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "failed_precondition" and says in r.json()["detail"], r.text
    assert r.json()["detail"].count(". ") == 0  # one sentence
    assert client.get("/v1/sessions").json()["sessions"] == []  # nothing started


def test_default_opponents_are_among_what_the_planner_plays(partial):
    client, _ = partial
    manager = client.app.state.manager

    def resolve(**kw):
        cfg = SessionConfig(game_id=HEX, **kw)
        return client.portal.call(lambda: manager.resolve(cfg, opponent_given="opponent" in kw))

    # A person plays the planner at the largest budget it serves (2), not the game's (4).
    assert resolve(agent="human").opponent_k == 2
    assert resolve(agent="human", opponent="planner").opponent_k == 2
    assert resolve(agent="reflex").opponent == "reflex"


class _Stub:
    """A planner stub whose ListGames answers `games` (or fails when `down`), counting calls."""

    def __init__(self) -> None:
        self.calls, self.down, self.compiling = 0, False, False

    async def ListGames(self, request, timeout):  # noqa: N802 (the gRPC method's name)
        self.calls += 1
        if self.down:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
            )
        game = pb.PlannerGame(game_id=HEX, budgets=[2, 4], compiling=self.compiling)
        return pb.ListPlannerGamesResponse(games=[game])


def test_answers_are_kept_briefly_and_an_unreachable_service_is_asked_again():
    now = [0.0]
    stub = _Stub()
    caps = PlannerCapabilities(stub, "here:1", cache_s=5.0, clock=lambda: now[0])

    async def scenario():
        first = await caps.get()
        assert first.games == {HEX: ServedGame((2, 4), False)} and first.error is None
        now[0] = 4.0
        assert await caps.get() is first and stub.calls == 1  # kept
        now[0], stub.down = 6.0, True
        down = await caps.get()
        assert stub.calls == 2 and down.error.endswith("did not answer (UNAVAILABLE: down)")
        assert down.refusal(HEX, k=2) == down.error
        stub.down = False
        assert (await caps.get()).error is None and stub.calls == 3  # asked again at once

    asyncio.run(scenario())
    no_address = asyncio.run(PlannerCapabilities(None, None).get())
    assert "no planner_address" in no_address.describe(HEX)["reason"]
    assert Capabilities("x", {HEX: ServedGame((2,), True)}).describe(HEX)["gate"]


def test_a_game_still_compiling_is_refused_by_name_and_asked_about_again_soon():
    now = [0.0]
    stub = _Stub()
    stub.compiling = True
    caps = PlannerCapabilities(stub, "here:1", cache_s=5.0, clock=lambda: now[0])

    async def scenario():
        first = await caps.get()
        assert first.games == {HEX: ServedGame((2, 4), False, ready=False)}
        assert "is still compiling speed-hex-v0" in first.refusal(HEX, k=2)
        shown = first.describe(HEX)
        assert shown["compiling"] and not shown["available"] and shown["budgets"] == []
        now[0] = 0.5
        assert await caps.get() is first and stub.calls == 1
        now[0], stub.compiling = 1.5, False  # past COMPILING_CACHE_S: asked again
        ready = await caps.get()
        assert stub.calls == 2 and ready.refusal(HEX, k=2) is None
        assert not ready.describe(HEX)["compiling"]

    asyncio.run(scenario())


def test_a_session_is_never_refused_on_a_stale_compiling_answer():
    now = [0.0]
    stub = _Stub()
    stub.compiling = True
    caps = PlannerCapabilities(stub, "here:1", cache_s=5.0, clock=lambda: now[0])

    async def scenario():
        assert not (await caps.get()).games[HEX].ready and stub.calls == 1
        stub.compiling = False  # ready 0.1 s later, well inside COMPILING_CACHE_S
        now[0] = 0.1
        assert not (await caps.get()).games[HEX].ready and stub.calls == 1  # the lobby: cached
        decided = await caps.get(deciding=True)  # a session's creation asks again
        assert decided.refusal(HEX, k=2) is None and stub.calls == 2
        assert await caps.get(deciding=True) is decided and stub.calls == 2  # all ready: cached

    asyncio.run(scenario())


class _SlowStub(_Stub):
    """A `_Stub` whose answers take `delay_s` (a planner service busy compiling)."""

    delay_s = 0.0

    async def ListGames(self, request, timeout):  # noqa: N802 (the gRPC method's name)
        await asyncio.sleep(self.delay_s)
        return await super().ListGames(request, timeout)


def test_a_slow_service_never_holds_the_game_list_up():
    stub = _SlowStub()
    stub.compiling = True
    caps = PlannerCapabilities(stub, "here:1")

    async def scenario():
        assert not (await caps.get()).games[HEX].ready  # the first answer is waited for
        stub.delay_s, stub.compiling = 3.0, False
        await asyncio.sleep(COMPILING_CACHE_S)
        t0 = time.monotonic()
        listed = await caps.get()  # the game list: the last answer, as the new one is slow
        assert time.monotonic() - t0 < FRESH_WAIT_S + 0.3
        assert not listed.games[HEX].ready
        decided = await caps.get(deciding=True)  # a session's creation waits for the truth
        assert decided.games[HEX].ready and time.monotonic() - t0 > 2.5
        assert (await caps.get()).games[HEX].ready  # and the game list has it since

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def held(serve, tmp_path_factory):
    """An env server over a real planner service (gRPC on port 0) of Snake with a gate whose
    compile starts after both answer, held after the gate (`support.HeldCompile`)."""
    tmp = tmp_path_factory.mktemp("held")
    root = write_checkpoints(tmp / "env", (SNAKE,))
    folder = write_planner(tmp / "planner", SNAKE, budgets=(2,), simulations=(2,))
    write_gate(folder, SNAKE)
    engine = Engine.from_dir(folder, compiler_options={"xla_backend_optimization_level": 0})
    service = BackgroundService(engine).start(compile=False)
    return serve(checkpoint_dir=root, services=(service,)).client, HeldCompile(engine)


def _snake(client) -> dict:
    return next(g for g in client.get("/v1/games").json()["games"] if g["id"] == SNAKE)["planner"]


def _listed_within(client, since: float, what, bound_s: float = 3.0) -> float:
    """Seconds after `since` at which GET /v1/games first shows `what(snake's planner)`."""
    while not what(_snake(client)):
        assert time.monotonic() - since < bound_s, _snake(client)
        time.sleep(0.05)
    return time.monotonic() - since


def test_the_game_list_follows_each_choice_as_it_compiles_and_refusals_offer_what_is_ready(
    held,
):
    client, compiling = held
    shown = _snake(client)
    assert shown["compiling"] and shown["gate_compiling"] and not shown["gate"], shown
    refused = client.post("/v1/sessions", json={"game": SNAKE, "agent": "planner"})
    assert refused.status_code == 409, refused.text
    said = refused.json()["detail"]
    assert "is still compiling snake-rt-v0" in said and said.endswith("; choose agent 'reflex'")

    compiling.start()
    assert compiling.gate_ready.wait(300)  # held there: its forced budgets compile later
    seconds = _listed_within(client, compiling.at["gate"], lambda p: p["gate"])
    print(f"the gate was listed ready {seconds:.2f} s after the planner service had it")
    shown = _snake(client)
    assert not shown["gate_compiling"] and shown["compiling"] and not shown["available"], shown
    # Forcing k is refused while the budgets compile; only the gate (ready) is offered.
    refused = client.post("/v1/sessions", json={"game": SNAKE, "agent": "planner", "k": 2})
    assert refused.status_code == 409, refused.text
    said = refused.json()["detail"]
    assert said.endswith("; leave k out to play its gate or choose agent 'reflex'"), said
    gated = client.post(
        "/v1/sessions",
        json={"game": SNAKE, "agent": "planner", "clock": "simulated", "max_frames": 4},
    )
    assert gated.status_code == 201, gated.text
    assert gated.json()["session"]["config"]["ks"] == []  # the gate picks k

    compiling.release()
    assert compiling.ready.wait(300)
    seconds = _listed_within(client, compiling.at["ready"], lambda p: p["available"])
    print(f"the budgets were listed ready {seconds:.2f} s after the planner service had them")
    assert not _snake(client)["compiling"]
