"""The outside engines, installed when missing, and our planner checkpoints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from filelock import FileLock

#: The `bench` extra of pyproject.toml.
OPEN_SPIEL = "open-spiel==2.0.2"
#: Debian installs GNU Go outside root's PATH.
DEBIAN_GNUGO = "/usr/games/gnugo"


def _run(cmd: list[str], *, check: bool) -> int:
    """Runs an installer, its output echoed to `sys.stderr` (whatever that is: under pytest's
    capture it has no file descriptor for the child to inherit); returns its exit status."""
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="", file=sys.stderr, flush=True)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, cmd, done.stdout)
    return done.returncode


def ensure_gnugo() -> str:
    """GNU Go's path, installed from Debian (`apt-get install -y gnugo`) when missing."""

    def find() -> str | None:
        return shutil.which("gnugo") or (DEBIAN_GNUGO if os.access(DEBIAN_GNUGO, os.X_OK) else None)

    if (path := find()) is not None:
        return path
    # One installer at a time (apt-get refuses to start while another holds dpkg's lock): two
    # matches started at once, as two test workers do, both find GNU Go missing.
    with FileLock(Path(tempfile.gettempdir()) / "rtplan-gnugo-install.lock"):
        if (path := find()) is not None:
            return path
        print("GNU Go missing: apt-get install -y gnugo", file=sys.stderr, flush=True)
        install = ["apt-get", "install", "-y", "gnugo"]
        if _run(install, check=False) != 0:
            _run(["apt-get", "update"], check=True)
            _run(install, check=True)
    if (path := find()) is None:
        raise SystemExit("bench.match: gnugo installed but not found")
    return path


def ensure_open_spiel() -> None:
    """Installs open_spiel (`pip install open-spiel==2.0.2`) into this Python when missing."""
    try:
        import pyspiel  # noqa: F401
    except ImportError:
        print(f"open_spiel missing: pip install {OPEN_SPIEL}", file=sys.stderr, flush=True)
        pip = [sys.executable, "-m", "pip", "install", OPEN_SPIEL]
        _run(pip, check=True)


def checkpoint(game: str, planner: str | None) -> Path:
    from rtplan.harness.checkpoint import CheckpointError, planner_file

    try:
        return planner_file(game, planner)
    except CheckpointError as e:
        raise SystemExit(f"bench.match: {e}") from e
