"""The env server's keys, as a process over real HTTP and gRPC: a host that is not loopback needs
a key or --open, any key of the API key file or the agent token creates sessions (REST and the
Env API's Join), a rewritten file rotates them without a restart, and no key or session token
shows in a log line, a page, an answer or a replay."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from rtplan.processes import Child, stop_all
from rtplan.processes._services import _ENV_BOUND
from rtplan.v1 import env_pb2
from support import AgentStream, session_ended, write_checkpoints

ROOT = Path(__file__).resolve().parents[2]
GAME = "snake-rt-v0"
#: Keys of the file (random-looking, so a match in a log is no coincidence) and the token.
K1, K2, K3 = "kf1-9d2Qw7LpX3vB8nRt", "kf2-Hs6Yc4Mz1aJe5uGo", "kf3-Tb0Nw8Fq2kDy7rVi"
TOKEN = "tok-Zp4Lm9Xc2Vb7Nq1W"
#: A key that is no key of the server: an answer or a log line must not repeat it either.
WRONG = "wrong-Rk3Jd8Sx5Ge1Ua6Y"
BODY = {"game": GAME, "agent": "reflex", "fps": 30.0, "max_frames": 4}


def _argv(tmp: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rtplan",
        "env-server",
        "--http-port=0",
        "--grpc-port=0",
        f"--checkpoint-dir={tmp / 'ckpt'}",
        f"--record-dir={tmp / 'replays'}",
        f"--results-dir={tmp / 'results'}",
        *flags,
    ]


@contextlib.contextmanager
def _server(tmp: Path, *flags: str, env: dict | None = None) -> Iterator[tuple[str, str, Child]]:
    """The env server as a process (its output kept in `Child.lines`): (http base, gRPC
    address, the child)."""
    child = Child("env-server", _argv(tmp, *flags), echo=False, env=env)
    try:
        bound = child.wait_for("rtplan env server:", 180)
        http, grpc_port = map(int, _ENV_BOUND.search(bound).groups())
        yield f"http://127.0.0.1:{http}", f"127.0.0.1:{grpc_port}", child
    finally:
        stop_all([child])


def _call(method: str, url: str, body: dict | None = None, key: str | None = None):
    """(status, headers, body text) of one REST call."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key is not None:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=180) as resp:
            return resp.status, resp.headers, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def _create(base: str, key: str | None, **body) -> tuple[int, dict]:
    status, headers, text = _call("POST", f"{base}/v1/sessions", {**BODY, **body}, key)
    answer = json.loads(text)
    if status == 401:
        assert headers["WWW-Authenticate"] == "Bearer"
    if status >= 400:  # the error model: server/_errors.py's ErrorBody
        assert set(answer) == {"error", "detail"}, answer
        assert WRONG not in answer["detail"]
    return status, answer


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("keys")
    write_checkpoints(tmp / "ckpt", (GAME,))
    return tmp


def _run(tmp: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(tmp, *flags), cwd=ROOT, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_host_that_is_not_loopback_needs_a_key_or_open(ckpt, host):
    """No key on 0.0.0.0 or ::: one line naming both ways out, exit 2, before anything binds.
    `--open` starts it, with a WARNING, and anyone creates sessions."""
    refused = _run(ckpt, f"--host={host}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.splitlines() == [
        f"env server: refusing to serve {host}, which is not loopback, with no key (anyone who "
        "reaches it could create sessions): give keys with --api-key-file FILE (one a line) or "
        "RTPLAN_SERVER_AGENT_TOKEN, or pass --open to serve it open on purpose"
    ], refused.stderr
    assert "rtplan env server: http on" not in refused.stdout
    if host != "0.0.0.0":
        return
    with _server(ckpt, f"--host={host}", "--open") as (base, _, child):
        warning = (
            "WARNING rtplan.server: env server serves 0.0.0.0 open (--open, no key): anyone who "
            "reaches it can create sessions"
        )
        assert warning in child.lines, child.lines
        status, created = _create(base, None)
        assert status == 201, created


def test_a_key_file_that_cannot_serve_stops_the_start_in_one_line(ckpt, tmp_path):
    empty = tmp_path / "keys"
    empty.write_text("# no key yet\n")
    for path, says in ((tmp_path / "none", "cannot read the API key file"), (empty, "no key")):
        result = _run(ckpt, f"--api-key-file={path}")
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith("env server: ") and says in line and str(path) in line, line
    # A token that is too short is refused, and never shown.
    env = {**os.environ, "RTPLAN_SERVER_AGENT_TOKEN": "short-secret"}
    bad = subprocess.run(
        _argv(ckpt), cwd=ROOT, capture_output=True, text=True, timeout=180, env=env
    )
    assert bad.returncode == 2 and "the agent token must be at least 16" in bad.stderr
    assert "short-secret" not in bad.stderr + bad.stdout


def test_keys_of_the_file_and_the_token_create_sessions_and_rotate_without_a_restart(
    ckpt, tmp_path
):
    """Served on 0.0.0.0 with a file of two keys and the agent token: no key is 401, a wrong
    one 403 (REST; PERMISSION_DENIED in the Env API's stream), each key 201 (and a Join); the
    file rewritten drops its old key at once, with no restart."""
    keys = tmp_path / "api_keys"
    keys.write_text(f"# two keys\n{K1}\n\n{K2}\n")
    env = {"RTPLAN_SERVER_AGENT_TOKEN": TOKEN}
    flags = ("--host=0.0.0.0", f"--api-key-file={keys}")
    with _server(ckpt, *flags, env=env) as (base, grpc_address, child):
        assert not [line for line in child.lines if "WARNING" in line], child.lines
        status, missing = _create(base, None)
        assert status == 401 and missing["error"] == "unauthenticated", missing
        assert "Authorization: Bearer <key>" in missing["detail"]
        status, wrong = _create(base, WRONG)
        assert status == 403 and wrong["error"] == "permission_denied", wrong
        for key in (K1, K2, TOKEN):
            status, created = _create(base, key)
            assert status == 201, created

        agent = AgentStream(grpc_address)
        for token in ("", WRONG):
            agent.join(game_id=GAME, token=token, fps=30.0)
            err, _ = agent.expect("error")
            assert err.code == 7 and "needs a key of this server" in err.message  # DENIED
            assert WRONG not in err.message
        agent.join(game_id=GAME, token=K2, fps=30.0)
        hello, _ = agent.expect("handshake")
        assert hello.session_id
        agent.send(env_pb2.AgentMessage(leave=env_pb2.Leave()))
        agent.close()

        # Rotated: rewritten in place (a compose secret is a bind-mounted file) without K1.
        with keys.open("w") as f:
            f.write(f"{K2}\n{K3}\n")
        os.utime(keys, ns=(1, 1))  # a new mtime, whatever the clock's grain
        assert _create(base, K1)[0] == 403
        assert _create(base, K3)[0] == 201 and _create(base, K2)[0] == 201
        assert _create(base, TOKEN)[0] == 201  # the token is no line of the file
        child.wait_for(f"API key file {keys} read again: 2 key(s)", 10)


def _get(base: str, path: str) -> str:
    status, _, text = _call("GET", f"{base}{path}")
    assert status == 200, (path, status, text[:300])
    return text


def _watch(base: str, viewer_path: str) -> str:
    """Every message a viewer's websocket gets until the server closes it."""
    texts = []
    url = base.replace("http", "ws") + viewer_path
    with connect(url, open_timeout=30) as ws, contextlib.suppress(ConnectionClosed, TimeoutError):
        while True:
            texts.append(ws.recv(timeout=60))
    return "\n".join(texts)


def test_no_key_or_token_appears_in_a_log_page_answer_or_replay(ckpt, tmp_path):
    """The server at log level debug with its access log: sessions created with each key (REST
    and Join), recorded and played to their end, one deleted with its token, one joined by its
    token, a wrong key tried; then every page, answer, websocket message, replay file and log
    line is searched for the keys, the token, the wrong key and every session token. Only the
    POST that created a session holds that session's token."""
    keys = tmp_path / "api_keys"
    keys.write_text(f"{K1}\n{K2}\n")
    env = {"RTPLAN_SERVER_AGENT_TOKEN": TOKEN}
    flags = (f"--api-key-file={keys}", "--log-level=debug", "--access-log")
    seen: list[str] = []  # everything the server said or served
    session_tokens = []
    with _server(ckpt, *flags, env=env) as (base, grpc_address, child):
        assert _create(base, WRONG)[0] == 403
        created = []
        for n, key in enumerate((K1, K2, TOKEN)):
            status, answer = _create(base, key, record=True, seed=n, featured=n == 0)
            assert status == 201, answer
            session_tokens.append(answer["token"])
            created.append(answer)
        # An outside agent's session: made over REST, joined over gRPC with its token, played.
        status, outside = _create(base, K1, agent="grpc", record=True)
        assert status == 201, outside
        session_tokens.append(outside["token"])
        agent = AgentStream(grpc_address)
        agent.join(session_id=outside["id"], token=outside["token"], fps=30.0)
        agent.expect("handshake")
        while agent.next(60) is not None:  # its frames, played by the fallback, to the end
            pass
        agent.close()
        # One created by a Join with a key, then left.
        joined = AgentStream(grpc_address)
        joined.join(game_id=GAME, token=K2, fps=30.0, record=True)
        hello, _ = joined.expect("handshake")
        joined.send(env_pb2.AgentMessage(leave=env_pb2.Leave()))
        joined.close()
        # One deleted by its holder.
        status, doomed = _create(base, K2, max_frames=0)
        session_tokens.append(doomed["token"])
        assert _call("DELETE", f"{base}/v1/sessions/{doomed['id']}", key=doomed["token"])[0] == 200

        seen.append(_watch(base, created[0]["viewer_path"]))
        ids = [c["id"] for c in created] + [outside["id"], hello.session_id, doomed["id"]]
        ended = [session_ended(base, sid) for sid in ids if sid != doomed["id"]]
        for path in ("/", "/tv", f"/watch?session={ids[0]}", "/results", "/healthz"):
            seen.append(_get(base, path))
        for path in ("/v1/games", "/v1/featured", "/openapi.json", "/v1/replays?limit=200"):
            seen.append(_get(base, path))
        seen.append(_get(base, "/v1/sessions?limit=500"))
        seen += [_get(base, f"/v1/sessions/{sid}") for sid in ids if sid != doomed["id"]]
        replays = [Path(info["replay"]).name for info in ended if info.get("replay")]
        assert len(replays) >= 4, ended
        for name in replays:
            seen.append(_get(base, f"/v1/replays/{name}"))
    record_dir = ckpt / "replays"
    files = [p for p in record_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= set(replays)
    seen += [p.read_text(errors="replace") for p in files]
    log = "\n".join(child.lines)
    assert "POST /v1/sessions HTTP/1.1" in log and "DEBUG" in log  # the log is there to search
    seen.append(log)
    text = "\n".join(seen)
    assert all(sid in text for sid in ids)  # what is public is there: the search can find
    for secret in (K1, K2, TOKEN, WRONG, *session_tokens):
        assert secret not in text, f"{secret[:4]}... appears in what the server said or served"
