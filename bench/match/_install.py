"""The outside engines, installed when missing, and our planner checkpoints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: The `bench` extra of pyproject.toml.
OPEN_SPIEL = "open-spiel==2.0.2"
#: Debian installs GNU Go outside root's PATH.
DEBIAN_GNUGO = "/usr/games/gnugo"


def ensure_gnugo() -> str:
    """GNU Go's path, installed from Debian (`apt-get install -y gnugo`) when missing."""

    def find() -> str | None:
        return shutil.which("gnugo") or (DEBIAN_GNUGO if os.access(DEBIAN_GNUGO, os.X_OK) else None)

    if (path := find()) is None:
        print("GNU Go missing: apt-get install -y gnugo", file=sys.stderr, flush=True)
        install = ["apt-get", "install", "-y", "gnugo"]
        if subprocess.run(install, stdout=sys.stderr, check=False).returncode != 0:
            subprocess.run(["apt-get", "update"], stdout=sys.stderr, check=True)
            subprocess.run(install, stdout=sys.stderr, check=True)
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
        subprocess.run(pip, stdout=sys.stderr, check=True)


def checkpoint(game: str, planner: str | None) -> Path:
    from harness.checkpoint import CheckpointError, planner_file

    try:
        return planner_file(game, planner)
    except CheckpointError as e:
        raise SystemExit(f"bench.match: {e}") from e
