"""`rtplan health` against a real planner service (compiling, then SERVING), env server and
arena."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rtplan.cli import main
from rtplan.processes import http_json
from support import free_port, uvicorn_app, write_planner

SNAKE = "snake-rt-v0"


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """A real planner service on port 0, listening but not compiled yet (one budget: a short
    compile), and a real env server (uvicorn on a thread) pointed at it; yields both."""

    from rtplan.planner_service import BackgroundService, Engine
    from rtplan.server.app import create_app
    from rtplan.server.settings import Settings

    tmp = tmp_path_factory.mktemp("health")
    root = write_planner(tmp / "ckpt", SNAKE, budgets=(2,), simulations=(2,))
    fast = {"xla_backend_optimization_level": 0}
    planner = BackgroundService(Engine.from_dir(root, compiler_options=fast)).start(compile=False)
    settings = Settings(
        http_port=0,
        grpc_port=0,
        checkpoint_dir=root,
        record_dir=tmp / "replays",
        results_dir=tmp / "results",
        planner_address=planner.address,
    )
    try:
        with uvicorn_app(create_app(settings)) as base:
            yield planner, base
    finally:
        planner.stop()


def _health(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["health", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_planner_health_fails_while_compiling_and_passes_once_serving(services, capsys):
    planner, _ = services
    code, out, err = _health(capsys, "--planner", planner.address)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("rtplan health: error: ")
    assert f"planner service at {planner.address} is NOT_SERVING (compiling: 0/2" in err

    planner.engine.compile()
    code, out, err = _health(capsys, "--planner", planner.address)
    assert code == 0 and err == ""
    assert (
        out
        == f"planner service at {planner.address} is SERVING (2 executables compiled) on cpu:0\n"
    )


def test_env_health_passes_when_healthz_answers_ok(services, capsys):
    _, url = services
    code, out, err = _health(capsys, "--env", url)
    assert code == 0 and err == ""
    assert out.startswith(f"env server at {url}/healthz is ok (version ")
    code, out, _ = _health(capsys, "--env", url.removeprefix("http://"))  # the scheme is optional
    assert code == 0


def test_arena_health_passes_when_healthz_answers_ok(tmp_path, capsys):
    from rtplan.arena.app import create_app
    from rtplan.arena.settings import ArenaSettings

    with uvicorn_app(create_app(ArenaSettings(database=str(tmp_path / "arena.db")))) as url:
        code, out, err = _health(capsys, "--arena", url)
        said = http_json("GET", f"{url}/healthz")
    assert code == 0 and err == ""
    assert out == (
        f"arena at {url}/healthz is ok (version {said['version']}, sqlite database at schema "
        f"{said['schema_revision']})\n"
    )
    assert said["schema_revision"]


def test_an_unreachable_service_fails_in_one_line(capsys):
    port = free_port()
    start = time.monotonic()
    code, out, err = _health(capsys, "--planner", f"127.0.0.1:{port}", "--timeout", "2")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert f"planner service at 127.0.0.1:{port} is unreachable: UNAVAILABLE" in err
    code, out, err = _health(capsys, "--env", f"http://127.0.0.1:{port}", "--timeout", "2")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert f"env server at http://127.0.0.1:{port}/healthz is unreachable: " in err
    code, out, err = _health(capsys, "--arena", f"127.0.0.1:{port}", "--timeout", "2")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert f"arena at http://127.0.0.1:{port}/healthz is unreachable: " in err
    assert time.monotonic() - start < 10


class _Answers(http.server.BaseHTTPRequestHandler):
    """GET /healthz answers 503 on /bad/healthz and a JSON body that is not ok elsewhere."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/bad/"):
            self.send_error(503, "starting")
            return
        body = b'{"status": "draining"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_an_env_server_that_is_not_ok_fails_with_what_it_said(capsys):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        code, _, err = _health(capsys, "--env", f"{base}/bad")
        assert code == 1 and f"env server at {base}/bad/healthz answered 503 starting" in err
        code, _, err = _health(capsys, "--env", base)
        assert code == 1 and "is not ok: {'status': 'draining'}" in err
        code, _, err = _health(capsys, "--arena", f"{base}/bad")
        assert code == 1 and f"arena at {base}/bad/healthz answered 503 starting" in err
    finally:
        server.shutdown()
        server.server_close()


def test_the_command_imports_no_jax():
    """A container's health check runs it every few seconds: it stays a light process."""
    probe = (
        "import sys; from rtplan.cli import main; "
        "code = main(['health', '--planner', '127.0.0.1:1', '--timeout', '1']); "
        "print(code, [m for m in ('jax', 'jaxlib', 'flax') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],  # this checkout's packages
    )
    assert out.stdout.strip() == "1 []", out.stderr
