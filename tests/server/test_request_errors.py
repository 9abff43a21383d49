"""Readable refusals from a real env server (`rtplan env-server` on port 0): every malformed REST
request gets one sentence naming the field and what it must be, in the shape of the server's
other errors; a malformed gRPC Join gets INVALID_ARGUMENT saying what was wrong."""

from __future__ import annotations

import http.client
import json
import math
import urllib.parse

import pytest

from rtplan.processes import services
from rtplan.v1 import env_pb2
from support import AgentStream

FIELDS = (
    "the fields game (required), seed, fps, agent, k, fallback, committed, clock, record, "
    "opponent, opponent_k, max_frames, time_s, increment_s, featured, sealed, join_within_s"
)
GAME = "snake-rt-v0"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("errors")  # no checkpoints: nothing compiles
    with services((), planner=False, echo=False, checkpoint_dir=tmp, record_dir=tmp) as addr:
        yield addr


def request(
    addr: dict, method: str, path: str, body: bytes | None = None, content_type: str | None = None
) -> tuple[int, dict]:
    """One HTTP request as a client sends it (raw bytes, any Content-Type or none)."""
    url = urllib.parse.urlsplit(addr["http"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        headers = {} if content_type is None else {"Content-Type": content_type}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def refusal(addr: dict, body: bytes, content_type: str | None = "application/json") -> str:
    """POST /v1/sessions with `body`: asserts a 422 in the errors' shape; its sentence."""
    status, answer = request(addr, "POST", "/v1/sessions", body, content_type)
    assert status == 422, answer
    assert set(answer) == {"error", "detail"} and answer["error"] == "invalid_request", answer
    detail = answer["detail"]
    # One sentence of ours: no pydantic location paths, no list of validator messages.
    assert "Input should" not in detail and ";" not in detail.split("(")[0], detail
    assert "\n" not in detail, detail
    return detail


def test_a_body_that_is_no_json_object_says_what_the_body_must_be(server):
    # Before: "0: JSON decode error".
    assert refusal(server, b"not json") == (
        f"the body is not valid JSON (Expecting value at character 0): send a JSON object with "
        f"{FIELDS}"
    )
    assert refusal(server, b'{"game": ').startswith("the body is not valid JSON (Expecting value")
    assert refusal(server, b"\xff\xfe").startswith("the body is not valid JSON")
    # Before: "body: Field required".
    assert refusal(server, b"") == f"the body is empty: send a JSON object with {FIELDS}"
    # Before: "body: Input should be a valid dictionary or object to extract fields from".
    for body, kind in ((b"[1, 2]", "an array"), (b'"snake"', "a string"), (b"null", "null")):
        assert refusal(server, body) == f"the body must be a JSON object with {FIELDS}, got {kind}"
    assert refusal(server, b'{"game": "snake-rt-v0"}', "text/plain") == (
        "the body must be a JSON object sent as Content-Type application/json, "
        "got Content-Type 'text/plain'"
    )
    assert refusal(server, b'{"game": "snake-rt-v0"}', None).endswith("got no Content-Type")


#: A wrong value per field: what the sentence says the field must be, and the value shown.
WRONG = {
    "game": (3, 'a game id such as "snake-rt-v0" (GET /v1/games lists them)', "3"),
    "seed": ("7", "an integer in [0, 2**63)", '"7"'),
    "fps": ("fast", "a number > 0 (frames per second; leave it out for the default)", '"fast"'),
    "agent": ("bot", "one of 'grpc', 'reflex', 'planner' or 'human'", '"bot"'),
    "k": (
        "lots",
        "a budget (an integer) or a list of budgets played in turn (leave it out to let the "
        "gate pick)",
        '"lots"',
    ),
    "fallback": (1, "one of 'game' or 'reflex'", "1"),
    "committed": ("yes", "one of 'reflex' or 'plan'", '"yes"'),
    "clock": ("fast", "one of 'real_time', 'real-time' or 'simulated'", '"fast"'),
    "record": ("yes", "true or false", '"yes"'),
    "opponent": (5, "one of 'reflex', 'random', 'planner' or 'gate'", "5"),
    "opponent_k": ("x", "an integer >= 1 (the planner opponent's budget)", '"x"'),
    "max_frames": (1.5, "an integer >= 0 (frames to play; 0: until the game ends)", "1.5"),
    "time_s": (
        "1:00",
        "a number of seconds in [0, 10800] (each side's clock; 0: the game's, in ticks)",
        '"1:00"',
    ),
    "increment_s": ("+1", "a number of seconds in [0, 10800] (given back after each move)", '"+1"'),
}


@pytest.mark.parametrize("field", sorted(WRONG))
def test_each_field_of_a_wrong_type_is_named_with_what_it_must_be(server, field):
    value, expected, shown = WRONG[field]
    body = {"game": GAME, field: value}
    assert refusal(server, json.dumps(body).encode()) == f"{field} must be {expected}, got {shown}"


def test_values_out_of_range_unknown_and_missing_fields(server):
    def refused(**body) -> str:
        return refusal(server, json.dumps(body).encode())

    # Before: "k.int: Input should be a valid integer; k.list[int].1: Input should be ...".
    assert refused(game=GAME, k=[1, "x"]).endswith('got [1, "x"]')
    assert refused(game=GAME, seed=-1) == "seed must be an integer in [0, 2**63), got -1"
    assert refused(game=GAME, seed=2**64).endswith("got 18446744073709551616")
    assert refused(game=GAME, seed=True).endswith("got true")  # strict: a bool is no integer
    assert refused(game=GAME, fps=0).startswith("fps must be a number > 0")
    assert refused(game=GAME, fps=math.nan).endswith("got NaN")
    assert refused(game="x" * 200).endswith("xxx...")  # the value shown is cut short
    # Before: "junk: Extra inputs are not permitted".
    assert refused(game=GAME, junk=1) == (
        "unknown field 'junk': the fields are game, seed, fps, agent, k, fallback, committed, "
        "clock, record, opponent, opponent_k, max_frames, time_s, increment_s, featured, sealed, "
        "join_within_s"
    )
    # Before: "game: Field required".
    assert refused(seed=1) == (
        'game is required: a game id such as "snake-rt-v0" (GET /v1/games lists them)'
    )
    # Several wrong fields: the first is explained, the others named.
    assert refused(game=GAME, k="x", junk=1, record=2).endswith(
        'got "x" (also wrong: record, junk)'
    )


def test_query_parameters_and_every_other_error_share_the_shape(server):
    status, answer = request(server, "GET", "/v1/replays/nope.jsonl/boards?count=x")
    assert (status, answer) == (
        422,
        {
            "error": "invalid_request",
            "detail": "query parameter count must be an integer in [1, 64], got x",
        },
    )
    status, answer = request(server, "GET", "/v1/replays/nope.jsonl/boards?start=-1")
    assert (
        answer["detail"]
        == "query parameter start must be an integer >= 0 (the first frame), got -1"
    )
    # A refusal by the session manager (SessionError) and by the router: the same two keys.
    status, answer = request(
        server, "POST", "/v1/sessions", b'{"game": "chess-v9"}', "application/json"
    )
    assert status == 422 and set(answer) == {"error", "detail"}, answer
    assert "unknown game 'chess-v9'" in answer["detail"]
    status, answer = request(server, "GET", "/v1/sessions/nope")
    assert (status, set(answer)) == (404, {"error", "detail"})


def test_a_malformed_grpc_join_gets_invalid_argument_saying_what_was_wrong(server):
    agent = AgentStream(server["grpc"], timeout=60)
    try:
        cases = [
            ({}, "Join needs session_id and token, or game_id to create a session"),
            ({"protocol_version": "rtplan.v0", "game_id": GAME}, "protocol version 'rtplan.v0'"),
            ({"game_id": "chess-v9"}, "unknown game 'chess-v9'"),
            ({"game_id": GAME, "fps": -3.0}, "fps must be a finite number > 0, got -3.0"),
            ({"game_id": GAME, "fps": math.inf}, "fps must be a finite number > 0, got inf"),
            ({"game_id": GAME, "seed": 2**64 - 1}, "seed must be in [0, 2**63)"),
            ({"game_id": GAME, "fallback": 7}, "unknown fallback 7: use FALLBACK_GAME/REFLEX"),
            ({"game_id": GAME, "clock": 9}, "unknown clock mode 9: use REAL_TIME/SIMULATED"),
        ]
        for fields, want in cases:
            agent.join(**fields)
            err, _ = agent.expect("error")
            assert err.code == 3 and want in err.message, (fields, err)  # INVALID_ARGUMENT
        agent.send(env_pb2.AgentMessage())
        err, _ = agent.expect("error")
        assert err.code == 3 and "empty AgentMessage" in err.message
    finally:
        agent.close()
