"""Fuzzing the env server: thousands of malformed agent messages and REST requests get specific
errors; nothing crashes or hangs, and the server stays healthy."""

from __future__ import annotations

import json
import math
import urllib.parse

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto_statuses import declared, declared_numbers, rpcs
from rtplan import games, wire
from rtplan.v1 import env_pb2
from support import AgentStream

GAME = "snake-rt-v0"
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
#: The codes a Play stream's error messages may carry (env.proto's "Stream errors:" list).
PLAY_ERRORS = declared_numbers("Env", "Play")


@pytest.fixture(scope="module")
def srv(serve):
    s = serve((GAME,))
    return s.client, s.address


def fuzz(settings_, send, **strategies) -> int:
    """Runs `send` on generated inputs under `settings_`; returns the sum of what it returned
    (the malformed messages it sent). Each test counts its own messages, so the thresholds
    hold however a parallel runner spreads the tests over processes."""
    sent = []

    @settings_
    @given(**strategies)
    def run(**drawn):
        sent.append(send(**drawn))

    run()
    return sum(sent)


def test_every_rpc_declares_its_statuses():
    """Each rpc of the .proto files lists its statuses (the fuzz below holds the servers to
    them); Play, whose errors travel in its stream, lists those too."""
    assert {("Env", "Play"), ("Planner", "Plan")} <= rpcs()
    for service, rpc in rpcs():
        assert declared(service, rpc) >= {grpc.StatusCode.OK}
        assert grpc.StatusCode.INTERNAL not in declared(service, rpc)  # a bug, never declared
    assert grpc.StatusCode.INVALID_ARGUMENT in declared("Env", "Play", stream=True)


def assert_healthy(srv) -> None:
    client, address = srv
    assert client.get("/healthz").json()["status"] == "ok"
    stub_games = AgentStream(address).stub.ListGames(env_pb2.ListGamesRequest(), timeout=10)
    assert {g.game_id for g in stub_games.games} == set(games.registered_games())


def bad_join(sid: str):
    """Joins that can never succeed: wrong protocol, unknown game, unknown session, or the
    waiting session `sid` with a wrong token."""
    text = st.text(max_size=40)
    wrong_version = st.builds(
        lambda v, g, s: env_pb2.Join(protocol_version=v, game_id=g, seed=s),
        text.filter(lambda v: v != wire.PROTOCOL_VERSION),
        st.one_of(text, st.sampled_from(games.registered_games())),
        st.integers(0, 2**64 - 1),
    )
    unknown_game = st.builds(
        lambda g, fps, fb, clock: env_pb2.Join(
            protocol_version=wire.PROTOCOL_VERSION, game_id=g, fps=fps, fallback=fb, clock=clock
        ),
        text.filter(lambda g: g not in games.registered_games()),
        st.floats(allow_nan=True, allow_infinity=True),
        int32,
        int32,
    )
    bad_settings = st.builds(
        lambda fps, fb, seed: env_pb2.Join(
            protocol_version=wire.PROTOCOL_VERSION, game_id=GAME, fps=fps, fallback=fb, seed=seed
        ),
        st.one_of(st.floats(max_value=0.0), st.floats(min_value=1e5), st.just(math.nan)),
        int32,
        st.integers(2**63, 2**64 - 1),
    )
    unknown_session = st.builds(
        lambda sid, tok: env_pb2.Join(
            protocol_version=wire.PROTOCOL_VERSION, session_id=sid, token=tok
        ),
        text.filter(bool),
        text,
    )
    wrong_token = st.builds(
        lambda tok: env_pb2.Join(protocol_version=wire.PROTOCOL_VERSION, session_id=sid, token=tok),
        text,
    )
    return st.one_of(wrong_version, unknown_game, bad_settings, unknown_session, wrong_token)


def test_fuzz_joins_get_errors_and_the_stream_stays_open(srv):
    client, address = srv
    waiting = client.post("/v1/sessions", json={"game": GAME, "agent": "grpc"}).json()
    seen = set()

    def send(joins) -> int:
        agent = AgentStream(address, timeout=60)
        for join in joins:
            if join is None:
                agent.send(env_pb2.AgentMessage())  # empty
            else:
                agent.send(env_pb2.AgentMessage(join=join))
            agent.act(int(np.random.randint(-5, 5)), 1)  # actions before any join
        for _ in range(2 * len(joins)):
            err, skipped = agent.expect("error", timeout=30)
            assert not skipped and err.code in (3, 5, 7, 9) and err.message
            assert err.code in PLAY_ERRORS, err  # declared in env.proto
            seen.add(err.code)
        agent.close()
        return 2 * len(joins)

    joins = st.lists(st.one_of(bad_join(waiting["id"]), st.none()), min_size=10, max_size=30)
    assert fuzz(FUZZ, send, joins=joins) >= 500
    assert seen == {3, 5, 7, 9}, seen  # invalid, not found, wrong token, precondition
    client.delete(
        f"/v1/sessions/{waiting['id']}", headers={"Authorization": f"Bearer {waiting['token']}"}
    )
    assert_healthy(srv)


#: Action messages that always get an error, whatever the current frame: an out-of-range
#: action for any frame (refused, or kept and judged INVALID), or any action for a past frame
#: or one far beyond the window of frames an agent may answer ahead.
BAD_ACTIONS = st.lists(
    st.one_of(
        st.tuples(int64, st.one_of(st.integers(-(2**31), -1), st.integers(4, 2**31 - 1))),
        st.tuples(st.one_of(st.integers(-(2**63), -1), st.integers(2**40, 2**63 - 1)), int32),
    ),
    min_size=20,
    max_size=40,
)


@pytest.fixture(scope="module")
def joined(srv):
    """A live real-time game whose agent only ever sends malformed actions (it plays on its
    reflex fallback), re-joined if it ends."""
    _, address = srv
    state = {"agent": None}

    def agent() -> AgentStream:
        if state["agent"] is None or state["agent"].status is not None:
            if state["agent"] is not None:
                state["agent"].close()
            state["agent"] = AgentStream(address, timeout=600)
            # 40 FPS: each example waits about a frame for its verdicts (at 10 FPS the 40
            # examples took ~40 s); the reflex keeps the tiny Snake well inside a frame.
            state["agent"].join(game_id=GAME, seed=9, fps=40.0, fallback=2)
            state["agent"].expect("handshake")
        return state["agent"]

    yield agent
    if state["agent"] is not None:
        state["agent"].close()


def test_fuzz_actions_get_errors_and_the_game_goes_on(srv, joined):
    def send(actions) -> int:
        agent = joined()
        for frame, action in actions:
            agent.act(frame, action)
        agent.send(env_pb2.AgentMessage(join=env_pb2.Join(protocol_version=wire.PROTOCOL_VERSION)))
        errors, frames = [], []
        while len(errors) < len(actions) + 1:
            msg = agent.next(timeout=30)
            if msg is None:  # the game ended meanwhile (the next example joins a new one)
                break
            if msg.WhichOneof("message") == "error":
                errors.append(msg.error)
            else:
                frames.append(msg.frame)
        assert all(e.code == 3 or "already joined" in e.message for e in errors), errors
        assert all(e.code in PLAY_ERRORS for e in errors), errors  # declared in env.proto
        nxt = agent.next(timeout=30) if msg is not None else None
        if nxt is not None:  # the game goes on (unless it just ended)
            assert nxt.WhichOneof("message") == "frame", nxt
            assert not frames or nxt.frame.frame > frames[-1].frame
        return len(errors)

    assert fuzz(FUZZ, send, actions=BAD_ACTIONS) >= 500
    assert_healthy(srv)


def test_fuzz_garbage_bytes_never_hurt_the_server(srv):
    client, address = srv
    channel = grpc.insecure_channel(address)
    play = channel.stream_stream(
        "/rtplan.v1.Env/Play",
        request_serializer=lambda b: b,
        response_deserializer=env_pb2.ServerMessage.FromString,
    )
    list_games = channel.unary_unary("/rtplan.v1.Env/ListGames")
    rng = np.random.default_rng(0)
    errors = []
    for _ in range(40):
        blobs = [rng.bytes(int(rng.integers(1, 200))) for _ in range(5)]
        call = play(iter(blobs), timeout=10)
        try:
            for msg in call:  # a blob that is no AgentMessage gets INVALID_ARGUMENT
                assert msg.WhichOneof("message") == "error", msg
                errors.append(msg.error)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        assert code != grpc.StatusCode.DEADLINE_EXCEEDED, "a garbage stream hung"
        assert code in declared("Env", "Play"), code  # declared in env.proto
        try:
            list_games(blobs[0], timeout=10)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        assert code in declared("Env", "ListGames"), code
    channel.close()
    assert all(e.code in PLAY_ERRORS for e in errors), errors  # declared in env.proto
    unparsed = [e for e in errors if "not a valid rtplan.v1.AgentMessage" in e.message]
    assert len(unparsed) > 100 and all(e.code == 3 for e in unparsed), errors
    assert_healthy(srv)


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=20)
)
json_value = st.recursive(
    json_scalar,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(), kids, max_size=4)
    ),
    max_leaves=8,
)
#: Numbers with a fraction (or not finite): a whole number written as a float (7.0) is the
#: integer it names, for the integer fields (the OpenAPI document's `integer`, as JSON Schema).
fractional = st.floats().filter(lambda x: not math.isfinite(x) or x != int(x))
BAD_FIELDS = {
    "game": st.one_of(st.text().filter(lambda g: g not in games.registered_games()), json_value),
    "seed": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**63), st.text()),
    "fps": st.one_of(st.floats(max_value=0), st.floats(min_value=1e5), st.text(), st.booleans()),
    "agent": st.text().filter(lambda a: a not in ("grpc", "reflex", "planner")),
    "k": st.one_of(st.integers(), st.lists(st.integers(), max_size=3), st.text()),
    "fallback": st.text().filter(lambda a: a not in ("game", "reflex")),
    "clock": st.text().filter(lambda a: a not in ("real_time", "real-time", "simulated")),
    "record": st.one_of(st.text(), st.integers(), fractional),
    "opponent": st.one_of(
        st.text().filter(lambda a: a not in ("reflex", "random", "planner")), st.integers()
    ),
    "opponent_k": st.one_of(st.integers(max_value=0), st.text(), fractional, st.booleans()),
    "max_frames": st.one_of(st.integers(max_value=-1), st.text(), fractional),
    "junk": json_value,
}


@st.composite
def bad_body(draw):
    kind = draw(st.sampled_from(["field", "json", "bytes"]))
    if kind == "field":
        body = {"game": GAME, "agent": "grpc", "clock": "simulated"}
        name = draw(st.sampled_from(sorted(BAD_FIELDS)))
        body[name] = draw(BAD_FIELDS[name])
    elif kind == "json":
        body = draw(json_value.filter(lambda v: not isinstance(v, dict) or "game" not in v))
    else:
        raw = draw(st.binary(max_size=200))
        return {"content": raw, "headers": {"content-type": "application/json"}}
    # json.dumps writes NaN/Infinity, which Python's JSON reader (the server's) accepts.
    return {"content": json.dumps(body), "headers": {"content-type": "application/json"}}


def test_fuzz_rest_requests_get_specific_4xx(srv):
    client, _ = srv

    def send(body, sid, auth) -> int:
        r = client.post("/v1/sessions", **body)
        assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
        assert r.json()["detail"], r.text
        r = client.delete(
            f"/v1/sessions/{urllib.parse.quote(sid, safe='')}",
            headers={"Authorization": "Bearer " + auth.encode().hex()},
        )
        assert r.status_code in (401, 403, 404, 405), r.text
        return 2

    rest = settings(FUZZ, max_examples=300)
    drawn = {"body": bad_body(), "sid": st.text(max_size=30), "auth": st.text(max_size=60)}
    assert fuzz(rest, send, **drawn) >= 300
    assert_healthy(srv)


def test_server_is_healthy_after_fuzzing(srv):
    client, _ = srv
    assert_healthy(srv)
    r = client.post("/v1/sessions", json={"game": GAME, "agent": "reflex", "max_frames": 3})
    assert r.status_code == 201
