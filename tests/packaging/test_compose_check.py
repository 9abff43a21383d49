"""`make compose-check` (deploy/compose_check.sh): the cpu profile in real containers, where a
Docker engine answers; slow (an image build and the planner's compile), so `-m slow` only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
