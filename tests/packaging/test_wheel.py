"""The wheel works outside a checkout: it carries the browser pages and the shipped checkpoints,
and, installed in a fresh venv, `rtplan demo` from an empty directory plays the shipped planner
and serves the lobby."""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
import setuptools

ROOT = Path(__file__).resolve().parents[2]
#: No gate: its planner service compiles 5 executables, not 10 (cold: 76 s here, Snake 158 s).
GAME = "speed-hex-v0"
SHIPPED_GAMES = sorted(p.parent.name for p in ROOT.glob("checkpoints/*/planner.msgpack"))
#: Never in the wheel: the checkout's other folders.
NOT_SHIPPED = ("tests/", "bench/", "archive/", "results/", "runs/", "examples/", "docs/")


def _shipped_files(root: Path, monkeypatch) -> dict[str, Path]:
    """setup.py's `shipped_files(root)`, with `setup()` itself left out."""
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    return runpy.run_path(str(ROOT / "setup.py"))["shipped_files"](root)


def test_the_wheel_takes_all_pages_and_only_top_level_checkpoint_files(tmp_path, monkeypatch):
    for name in ("index.html", "style.css", "games/snake.js", "README.md"):
        (tmp_path / "web" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "web" / name).write_text("x")
    game = tmp_path / "checkpoints" / GAME
    for name in ("planner.msgpack", "planner.msgpack.json", "README.md", "curve.png", "log.csv"):
        (game / name).parent.mkdir(parents=True, exist_ok=True)
        (game / name).write_text("x")
    for sub in ("training/planner.msgpack", "gate-training/run.json", "calibration/fig.png"):
        (game / sub).parent.mkdir(parents=True, exist_ok=True)
        (game / sub).write_text("x")
    assert sorted(_shipped_files(tmp_path, monkeypatch)) == [
        f"rtplan/harness/_assets/checkpoints/{GAME}/{name}"
        for name in ("README.md", "curve.png", "planner.msgpack", "planner.msgpack.json")
    ] + [
        f"rtplan/server/_assets/web/{name}"
        for name in ("README.md", "games/snake.js", "index.html", "style.css")
    ]


def _no_cache(directory: str, names: list[str]) -> list[str]:
    """What the copy of the tree leaves out: the venv, git, caches, earlier builds, run output."""
    skip = {".git", ".venv", "build", "dist", "runs", "archive", "replays", ".pytest_cache"}
    skip |= {".ruff_cache", "__pycache__"}
    return [n for n in names if n in skip or n.endswith(".egg-info")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built offline by this venv's pip and setuptools from a copy of the tree (so no
    file of an earlier build in the checkout's build/ can slip in, and nothing is written there)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_no_cache)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    result = subprocess.run(
        [*cmd, "-w", str(tmp / "dist"), "."], cwd=src, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (whl,) = (tmp / "dist").glob("rtplan-*.whl")
    return whl


def test_the_wheel_carries_the_pages_and_the_shipped_checkpoints(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    web = "rtplan/server/_assets/web/"
    pages = [p.relative_to(ROOT / "web").as_posix() for p in (ROOT / "web").rglob("*.*")]
    assert "index.html" in pages and any(p.startswith("games/") for p in pages)
    assert {web + p for p in pages} <= set(names)
    for game in SHIPPED_GAMES:
        for name in ("planner.msgpack", "planner.msgpack.json", "README.md"):
            assert f"rtplan/harness/_assets/checkpoints/{game}/{name}" in names, (game, name)
    assert GAME in SHIPPED_GAMES
    assert not [n for n in names if n.startswith(NOT_SHIPPED) or n.endswith(".csv")]
    # Of a checkpoint folder, its top-level files only:
    # rtplan/harness/_assets/checkpoints/<game>/<file>.
    assert all(n.count("/") == 5 for n in names if n.startswith("rtplan/harness/_assets/"))


def test_the_wheel_installs_one_top_level_name(wheel):
    """Only `rtplan` (and its .dist-info) lands on the path: the games, planner, gate and
    services are its subpackages, so no generic name (`games`, `server`, ...) can collide with
    another distribution's."""
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    info = next(t for t in tops if t.endswith(".dist-info"))
    assert tops == {"rtplan", info}
    assert zipfile.ZipFile(wheel).read(f"{info}/top_level.txt").decode().split() == ["rtplan"]
    for package in ("games", "harness", "planner", "gate", "planner_service", "server", "arena"):
        assert f"rtplan/{package}/__init__.py" in names, package
    # The arena migrates its database on start: its Alembic scripts ship as modules.
    for script in ("env.py", "versions/0001_initial.py"):
        assert f"rtplan/arena/migrations/{script}" in names, script
    assert "rtplan/examples/random_agent.py" in names  # `python -m rtplan.examples.random_agent`


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new venv with the wheel installed and this venv's dependencies on its path; returns its
    python.

    Installing the dependencies again would take the network and ~600 MB, so the new venv sees
    this venv's site-packages through a .pth file instead. A .pth line only appends a folder to
    sys.path: the .pth files inside that folder do not run, and among them is the editable
    install's finder (`__editable__.rtplan-*.pth`) that maps the packages to the checkout. So
    rtplan and its packages come from the wheel (the caller checks their `__file__`). The .pth
    is written after the install: pip must not see this venv's rtplan and uninstall it.
    """
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
    result = subprocess.run(
        [*install, "--no-compile", "-q", str(wheel)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (Path(site) / "test_venv_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


def _clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH, which could point back at the checkout, and
    without the services' settings variables."""
    return {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and not k.startswith(("RTPLAN_SERVER_", "RTPLAN_PLANNER_"))
    }


@pytest.mark.timeout(900)
def test_the_installed_wheel_runs_the_demo_from_an_empty_directory(wheel, tmp_path):
    python = _fresh_venv(tmp_path, wheel)
    venv = python.parents[1]
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    # What the services' settings default to (`rtplan env-server`, `rtplan planner-service`
    # started here), and where the packages come from.
    # ... and the game `rtplan demo` plays when none is named: the gated showcase, as from a
    # checkout (`make demo`); the replays' folder: the per-user data directory (HOME is a
    # folder of this test's, XDG_DATA_HOME unset).
    probe = (
        "import json, rtplan, rtplan.server._routes_pages as pages; "
        "from rtplan import harness, server; "
        "from rtplan.live import DemoGame; "
        "from rtplan.planner_service.settings import PlannerServiceSettings as P; "
        "assert server.Settings().checkpoint_dir == P().checkpoint_dir; "
        "demo = DemoGame.choose(None, None, k=2); "
        "print(json.dumps([rtplan.__file__, harness.__file__, server.__file__, "
        "str(P().checkpoint_dir), str(pages.find_web_dir()), demo.game, demo.gated, "
        "str(server.Settings().record_dir)]))"
    )
    home = tmp_path / "home"
    env = {k: v for k, v in _clean_env().items() if k != "XDG_DATA_HOME"}
    found = subprocess.run(
        [python, "-c", probe],
        cwd=empty,
        env={**env, "HOME": str(home)},
        capture_output=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    *modules, ckpt, web, showcase, gated, replays = json.loads(found.stdout)
    for path in map(Path, (*modules, ckpt, web)):  # the wheel's, not the checkout's
        assert path.is_relative_to(venv) and not path.is_relative_to(ROOT), path
    assert (Path(ckpt) / GAME / "planner.msgpack").is_file()
    assert (Path(web) / "index.html").is_file()
    assert (showcase, gated) == ("tetris-rt-v0", True)
    assert Path(replays) == home / ".local" / "share" / "rtplan" / "replays"

    cmd = [str(python.with_name("rtplan")), "demo", "--headless", "--game", GAME]
    cmd += ["--frames", "30", "--fps", "10", "--every", "5"]
    data = tmp_path / "data"  # the per-user data directory (XDG), where the replays go
    proc = subprocess.Popen(
        cmd,
        cwd=empty,
        env={**_clean_env(), "XDG_DATA_HOME": str(data)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the services go with it on failure
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 720  # a cold compile cache: the planner compiles first
        while not any("browse it:" in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        # The lobby, while the game plays (30 frames at 10 FPS: 3 s).
        lobby = next(line for line in lines if "browse it:" in line)
        base = re.search(r"(http://127\.0\.0\.1:\d+)/", lobby).group(1)
        page = urllib.request.urlopen(base + "/", timeout=30).read().decode()
        assert "<title>rtplan · lobby</title>" in page
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 60))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    reader.join(timeout=10)
    out = "".join(lines)
    assert rc == 0, out
    # The shipped planner played: frames searched by the planner service.
    stats = json.loads(next(line for line in lines if line.startswith("stats: "))[7:])
    assert stats["planned"] > 0, out
    # The example agent ships in the package: the command the demo prints, which it ran beside
    # its session, played a session of its own.
    assert "-m rtplan.examples.random_agent --address 127.0.0.1:" in out, out
    assert "how the frames chose their actions" in out, out
    # The replays: in the per-user data directory, which the demo names; none where it ran.
    assert list((data / "rtplan" / "replays").glob(f"{GAME}_*.jsonl")), out
    assert f"replays in: {data / 'rtplan' / 'replays'}" in out
    assert not list(empty.iterdir()), list(empty.iterdir())
