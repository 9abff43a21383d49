"""`make compose-check` (deploy/compose_check.sh): the cpu profile in real containers, where a
Docker engine answers; slow (an image build and the planner's compile), so `-m slow` only."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support import free_port

ROOT = Path(__file__).resolve().parents[2]


def _engine() -> bool:
    docker = shutil.which("docker")
    return bool(docker) and subprocess.run([docker, "info"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_compose_check_runs_the_cpu_profile_in_containers():
    if not _engine():
        pytest.skip("no Docker engine answers here (docs/services.md: how to start one)")
    run = subprocess.run(
        ["bash", str(ROOT / "deploy" / "compose_check.sh")],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=5300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "PASSED" in run.stdout


#: A Docker client whose engine answers and runs nothing: what compose_check.sh asks before its
#: first build (`info`, `compose version`, `compose ... ps -q`: no container) all succeed.
FAKE_DOCKER = """#!/bin/sh
exit 0
"""


def test_compose_check_publishes_the_host_ports_their_variables_name(tmp_path):
    """The script checks (and publishes, through docker-compose.yml) the host ports that
    RTPLAN_HOST_HTTP_PORT / RTPLAN_HOST_GRPC_PORT name, not a fixed 8000 and 50052: one held by
    a real socket fails it at once, naming the variable that moves it. No engine needed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHON": sys.executable,
            "RTPLAN_HOST_HTTP_PORT": str(port),
            "RTPLAN_HOST_GRPC_PORT": str(free_port()),
            "HEALTH_TIMEOUT_S": "5",  # a script that went past the check fails soon after
        }
        run = subprocess.run(
            ["bash", str(ROOT / "deploy" / "compose_check.sh")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        f"FAILED in step 'setup': port {port} is in use on the host: the cpu profile publishes "
        "it (stop what holds it, or set RTPLAN_HOST_HTTP_PORT=N to publish another)"
    ) in run.stdout, run.stdout + run.stderr
