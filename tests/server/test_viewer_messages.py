"""A viewer websocket's malformed or oversized client messages close that socket with a code
and a reason (RFC 6455: 1003, 1007, 1009); the session, its other viewers and the server go on.
A real `python -m rtplan.server` and a real websocket client."""

from __future__ import annotations

import json
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from rtplan.server._human import MAX_MESSAGE_BYTES, MAX_READ_BYTES
from support import env_server, get_json, post_session, write_checkpoints

GAME = "snake-rt-v0"


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """(the server's ws base, a live reflex session) on a real server; the session is deleted
    after."""
    tmp = tmp_path_factory.mktemp("viewer-messages")
    root = write_checkpoints(tmp / "ckpt", (GAME,))
    with env_server(tmp, root, (GAME,)) as base:
        created = post_session(base, game=GAME, agent="reflex", fps=20.0, max_frames=100_000)
        yield base, created


def frames(ws, n: int, timeout: float = 20.0) -> list[int]:
    """The next `n` frame numbers `ws` receives."""
    got, end = [], time.monotonic() + timeout
    while len(got) < n:
        msg = json.loads(ws.recv(timeout=max(0.1, end - time.monotonic())))
        if msg["type"] == "frame":
            got.append(msg["frame"])
    return got


MALFORMED = [
    (b"\x00\x01binary", 1003, "binary message"),
    ("not json", 1007, "not JSON"),
    ("[1, 2]", 1007, "not a JSON object: list"),
    ('{"type": "dance"}', 1007, "unknown message type 'dance'"),
    ('{"action": 1}', 1007, "unknown message type None"),
    ('{"type": "play", "token": 7}', 1007, "token must be a string, got 7"),
    ('{"type": "action", "frame": "3", "action": 1}', 1007, "frame must be an integer, got '3'"),
    ('{"type": "action", "frame": 3, "action": true}', 1007, "action must be an integer"),
    ("x" * (MAX_MESSAGE_BYTES + 1), 1009, f"at most {MAX_MESSAGE_BYTES}"),
    ("x" * (MAX_READ_BYTES + 1), 1009, ""),  # uvicorn's own limit: its own reason
]


def test_malformed_messages_close_with_a_code_and_the_session_goes_on(watched):
    base, created = watched
    url = base.replace("http", "ws") + created["viewer_path"]
    with connect(url, open_timeout=10) as other:
        before = frames(other, 1)[0]
        for message, code, reason in MALFORMED:
            with connect(url, open_timeout=10) as ws:
                ws.send(message)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        ws.recv(timeout=10)
            got = closed.value.rcvd
            assert got is not None and got.code == code, (message[:40], closed.value)
            assert reason in got.reason and got.reason, (message[:40], got.reason)
        # A well-formed message a person can act on gets an error reply; the socket stays.
        with connect(url, open_timeout=10) as ws:
            ws.send(json.dumps({"type": "play", "token": "wrong"}))
            errors = []
            while not errors:
                msg = json.loads(ws.recv(timeout=10))
                errors += [msg] if msg["type"] == "error" else []
            assert "not a person" in errors[0]["message"], errors
            assert frames(ws, 2)  # still open
        # The other viewer kept receiving frames; the session still runs.
        after = frames(other, 3)
        assert after[0] > before and after == sorted(after)
    info = get_json(base, f"/v1/sessions/{created['id']}")
    assert info["status"] == "running", info
