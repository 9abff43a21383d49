"""The arena's admin keys: `rtplan arena serve` on a host that is not loopback needs one or
--open (real processes), and `require_admin` guards a route over real HTTP: any key of the API
key file or the admin token opens it, a rewritten file rotates them, the errors are the arena's
error model and repeat no key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest
from pydantic import ValidationError

from rtplan.arena import ArenaSettings, create_app
from rtplan.arena._deps import ADMIN_ERRORS, Admin
from rtplan.arena._errors import KINDS, responses
from support import ROOT, uvicorn_app

K1, K2, K3 = "adm1-Qw7LpX3vB8nRt2", "adm2-Yc4Mz1aJe5uGo6", "adm3-Nw8Fq2kDy7rVi0"
TOKEN = "admtok-Lm9Xc2Vb7Nq1"
WRONG = "wrong-Jd8Sx5Ge1Ua6Yr"


def _serve(tmp_path, *args: str, env: dict | None = None):
    cmd = [sys.executable, "-m", "rtplan", "arena", "serve", "--port", "0"]
    cmd += ["--database", str(tmp_path / "arena.db"), *args]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _started(proc: subprocess.Popen) -> str:
    """Its start-up line, then stops it; its stderr."""
    try:
        line = proc.stdout.readline()
        assert line.startswith("rtplan arena: http on "), line
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    return proc.stderr.read()


def test_serve_on_a_host_that_is_not_loopback_needs_an_admin_key_or_open(tmp_path):
    refused = _serve(tmp_path, "--host", "0.0.0.0")
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 2 and out == ""
    assert err.splitlines() == [
        "arena: refusing to serve 0.0.0.0, which is not loopback, with no key (anyone who "
        "reaches it could call its administration routes): give keys with --api-key-file FILE "
        "(one a line) or RTPLAN_ARENA_ADMIN_TOKEN, or pass --open to serve it open on purpose"
    ], err
    err = _started(_serve(tmp_path, "--host", "0.0.0.0", "--open"))
    assert (
        "WARNING rtplan.arena: arena serves 0.0.0.0 open (--open, no key): anyone who reaches "
        "it can call its administration routes"
    ) in err, err
    keys = tmp_path / "keys"
    keys.write_text(f"{K1}\n")
    for args, env in (
        (("--api-key-file", str(keys)), None),
        ((), {"RTPLAN_ARENA_ADMIN_TOKEN": TOKEN}),
    ):
        err = _started(_serve(tmp_path, "--host", "0.0.0.0", *args, env=env))
        assert "WARNING" not in err and K1 not in err and TOKEN not in err, err
    bad = _serve(tmp_path, "--api-key-file", str(tmp_path / "none"))
    _, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and err.startswith("arena: cannot read the API key file "), err


def test_the_admin_token_is_no_flag_and_a_short_one_is_refused_unshown(tmp_path):
    help_text = subprocess.run(
        [sys.executable, "-m", "rtplan", "arena", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "--api-key-file" in help_text and "--open" in help_text
    assert "--admin-token" not in help_text
    with pytest.raises(ValidationError) as refused:
        ArenaSettings(admin_token="short-secret")
    assert "the admin token must be at least 16" in str(refused.value)
    assert "short-secret" not in str(refused.value)
    assert TOKEN not in repr(ArenaSettings(admin_token=TOKEN))


def _app(settings: ArenaSettings):
    """The arena with one administration route: what the admin routes to come will be."""
    app = create_app(settings)

    @app.post("/v1/admin/ping", dependencies=[Admin], responses=responses(*ADMIN_ERRORS))
    def ping() -> dict:
        return {"ok": True}

    return app


def _ping(base: str, key: str | None) -> httpx.Response:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{base}/v1/admin/ping", headers=headers, timeout=30)


def _error(response: httpx.Response, status: int, kind: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"] == kind and KINDS[kind][0] == status
    assert WRONG not in response.text


def test_an_admin_route_takes_any_key_of_the_file_or_the_token_and_keys_rotate(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"# admins\n{K1}\n{K2}\n")
    settings = ArenaSettings(
        database=str(tmp_path / "arena.db"), api_key_file=keys, admin_token=TOKEN
    )
    with uvicorn_app(_app(settings)) as base:
        missing = _ping(base, None)
        _error(missing, 401, "admin_key_required")
        assert missing.headers["WWW-Authenticate"] == "Bearer"
        _error(_ping(base, WRONG), 403, "wrong_admin_key")
        for key in (K1, K2, TOKEN):
            assert _ping(base, key).json() == {"ok": True}
        # Rewritten in place: K1 is dropped at once, K3 opens it.
        with keys.open("w") as f:
            f.write(f"{K2}\n{K3}\n")
        os.utime(keys, ns=(1, 1))
        _error(_ping(base, K1), 403, "wrong_admin_key")
        assert _ping(base, K3).status_code == _ping(base, K2).status_code == 200
        # Registration stays public: agents register with no admin key.
        made = httpx.post(f"{base}/v1/agents", json={"name": "pub", "version": "1"}, timeout=30)
        assert made.status_code == 201, made.text
        doc = httpx.get(f"{base}/openapi.json", timeout=30).json()
        declared = doc["paths"]["/v1/admin/ping"]["post"]["responses"]
        assert "admin_key_required" in declared["401"]["description"]
        assert "wrong_admin_key" in declared["403"]["description"]


def test_an_arena_with_no_key_leaves_its_admin_routes_open(tmp_path):
    """On loopback with no key (the default), as the env server with no agent token."""
    with uvicorn_app(_app(ArenaSettings(database=str(tmp_path / "arena.db")))) as base:
        assert _ping(base, None).status_code == _ping(base, WRONG).status_code == 200
