"""The arena held to its OpenAPI document: schemathesis (every check, the stateful phase too)
against a live arena, as the env server's (tests/server/test_openapi_fuzz.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def schemathesis(base: str, cwd: Path, examples: int) -> subprocess.CompletedProcess:
    """`schemathesis run` on the arena's document: seeded, `examples` per operation, every
    check and phase."""
    cmd = [str(SCHEMATHESIS), "run", f"{base}/openapi.json", "--checks", "all"]
    cmd += ["--seed", "1", "--max-examples", str(examples), "--workers", "1"]
    cmd += ["--phases", "examples,coverage,fuzzing,stateful", "--request-timeout", "60"]
    cmd += ["--suppress-health-check", "all", "--no-color"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600)


def _no_failures(run: subprocess.CompletedProcess) -> None:
    summary = run.stdout[-3000:]
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:]
    assert "failures" not in summary.splitlines()[-1] and "passed" in summary, summary


def test_schemathesis_finds_nothing_against_a_live_arena(arena, tmp_path):
    _no_failures(schemathesis(arena[0], tmp_path, examples=5))


@pytest.mark.slow
def test_schemathesis_longer_run_finds_nothing(arena, tmp_path):
    _no_failures(schemathesis(arena[0], tmp_path, examples=200))


def test_a_405_names_the_path_s_methods_and_a_401_its_scheme(arena):
    base = arena[0]
    answer = httpx.request("TRACE", f"{base}/v1/agents/x/versions/1/token")
    assert answer.status_code == 405 and answer.headers["allow"] == "DELETE, POST"
    assert answer.json()["error"] == "method_not_allowed"
    refused = httpx.post(f"{base}/v1/agents/x/versions/1/token")
    assert refused.status_code == 404  # an unknown agent before a missing token
    httpx.post(f"{base}/v1/agents", json={"name": "hal", "version": "1"})
    refused = httpx.post(f"{base}/v1/agents/hal/versions/1/token")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
