"""`python -m server`: uvicorn and the gRPC Env API on free ports, a real websocket client."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from rtplan.server.__main__ import _parser, main
from rtplan.v1 import env_pb2, env_pb2_grpc
from support import get_json, post_session, write_checkpoints

ROOT = Path(__file__).resolve().parents[2]


def test_main_rejects_bad_flags(capsys):
    with pytest.raises(SystemExit):
        main(["--http-port", "not-a-port"])
    assert "invalid int value" in capsys.readouterr().err


def test_help_describes_every_flag(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    flags = [a for a in _parser()._actions if a.dest != "help"]
    assert len(flags) >= 10
    for action in flags:
        assert action.help, f"{action.option_strings} has no help"
        assert f"{action.option_strings[0]}" in text and " ".join(action.help.split()) in text
    assert "RTPLAN_SERVER_GRPC_PORT" in text and "(default 50052" in text


def test_server_process_serves_rest_websockets_and_grpc(tmp_path):
    root = write_checkpoints(tmp_path / "ckpt", ("snake-rt-v0",))
    cmd = [sys.executable, "-m", "rtplan.server", "--http-port", "0", "--grpc-port", "0"]
    cmd += ["--checkpoint-dir", str(root), "--record-dir", str(tmp_path), "--log-level", "warning"]
    env = dict(os.environ, RTPLAN_SERVER_MAX_SESSIONS="3")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed once both servers listen
        assert "rtplan env server" in line, line
        http = int(line.split("http on 127.0.0.1:")[1].split()[0])
        grpc_port = int(line.split("gRPC Env API on 127.0.0.1:")[1].split()[0])
        assert line.rstrip().endswith(f"(replays in {tmp_path.resolve()})"), line
        base = f"http://127.0.0.1:{http}"
        health = get_json(base, "/healthz")
        assert health["status"] == "ok" and health["grpc_port"] == grpc_port

        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            listed = env_pb2_grpc.EnvStub(channel).ListGames(env_pb2.ListGamesRequest(), timeout=10)
        snake = next(g for g in listed.games if g.game_id == "snake-rt-v0")
        assert list(snake.observation.shape) == [5, 5, 5]  # the checkpoint's board

        created = post_session(base, game="snake-rt-v0", agent="reflex", fps=30, max_frames=12)
        messages = []
        with connect(f"ws://127.0.0.1:{http}{created['viewer_path']}", open_timeout=10) as ws:
            try:
                while True:
                    messages.append(json.loads(ws.recv(timeout=10)))
            except ConnectionClosed:
                pass
        assert messages[0]["type"] == "hello" and messages[-1]["type"] == "end"
        assert messages[-1]["reason"] == "max_frames"
        assert any(m["type"] == "frame" for m in messages)
        with (
            pytest.raises(ConnectionClosed) as closed,
            connect(f"ws://127.0.0.1:{http}/v1/sessions/nope/ws", open_timeout=10) as ws,
        ):
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == 4404
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def _serve_and_get(tmp_path: Path, *flags: str) -> str:
    """Starts `python -m server` at log level info with `flags`, GETs /healthz and /v1/games
    twice, stops it; its stdout and stderr together."""
    cmd = [sys.executable, "-m", "rtplan.server", "--http-port", "0", "--grpc-port", "0"]
    cmd += ["--checkpoint-dir", str(tmp_path / "none"), "--record-dir", str(tmp_path)]
    cmd += ["--log-level", "info", *flags]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        lines = []
        while not (lines and "rtplan env server" in lines[-1]):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        base = f"http://127.0.0.1:{int(lines[-1].split('http on 127.0.0.1:')[1].split()[0])}"
        for _ in range(2):
            assert get_json(base, "/healthz")["status"] == "ok"
            get_json(base, "/v1/games")
        # A page's websocket: uvicorn's lines per connection are the access log's too.
        ws_url = base.replace("http", "ws") + "/v1/sessions/0000000000000000/ws"
        with connect(ws_url) as ws, contextlib.suppress(ConnectionClosed):
            ws.recv(timeout=10)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, "".join(lines) + out
    return "".join(lines) + out


#: A line of uvicorn's access log: `INFO:     127.0.0.1:PORT - "GET /healthz HTTP/1.1" 200 OK`.
ACCESS_LINE = re.compile(r'"(GET|POST|DELETE) /\S* HTTP/1\.1" \d{3}')


def test_the_access_log_is_off_unless_asked_for(tmp_path):
    """A line per HTTP request (an open page polls about 4 times a second) only with
    --access-log, even at log level info."""
    quiet = _serve_and_get(tmp_path)
    assert not ACCESS_LINE.search(quiet), quiet
    assert "WebSocket" not in quiet and "connection open" not in quiet, quiet
    assert "Uvicorn running" in quiet or "Application startup complete" in quiet, quiet
    logged = _serve_and_get(tmp_path, "--access-log")
    hits = [line for line in logged.splitlines() if ACCESS_LINE.search(line)]
    assert sum('"GET /healthz HTTP/1.1" 200' in line for line in hits) == 2, logged
    assert sum('"GET /v1/games HTTP/1.1" 200' in line for line in hits) == 2, logged
    assert '"WebSocket /v1/sessions/0000000000000000/ws"' in logged, logged


@pytest.mark.parametrize("flag", ["--http-port", "--grpc-port"])
def test_a_port_in_use_is_one_line_naming_the_flag_that_moves_it(flag, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        ports = {"--http-port": "0", "--grpc-port": "0", flag: str(port)}
        cmd = [sys.executable, "-m", "rtplan.server", *(x for kv in ports.items() for x in kv)]
        cmd += ["--checkpoint-dir", str(tmp_path), "--record-dir", str(tmp_path)]
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    variable = "RTPLAN_SERVER_" + flag[2:].replace("-", "_").upper()
    assert result.stderr.splitlines() == [
        f"env server: cannot bind 127.0.0.1:{port} (Address already in use); pass {flag} N "
        f"(0: any free) or set {variable}"
    ], result.stderr
