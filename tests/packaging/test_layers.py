"""The import contracts in pyproject.toml: the tree keeps them, and each breach fails them."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = PYPROJECT["tool"]["importlinter"]["root_packages"]
CONTRACTS = {c["id"]: c for c in PYPROJECT["tool"]["importlinter"]["contracts"]}
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` run in `root`, which holds a pyproject.toml and the packages it checks (the
    working directory comes first on the import path, so a copy of the tree is what it reads)."""
    cmd = [str(LINT_IMPORTS), "--no-cache", "--no-logo"]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_its_contracts():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


#: The core packages: folders at the checkout's root (the design card's layout) that import,
#: and install, as subpackages of rtplan through a link `rtplan/<name>` -> `../<name>`.
CORE = sorted(
    p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("rtplan", "bench")
)


def test_every_package_is_checked_and_shipped_under_one_name():
    """A new core package (the gate, say) must be linked into rtplan and join the contracts;
    the wheel takes rtplan alone; bench/ joins the contracts only (it runs from a checkout)
    and nothing shipped may import it."""
    assert PACKAGES == ["rtplan", "bench"]
    assert set(CORE) == {
        "arena",
        "games",
        "gate",
        "harness",
        "planner",
        "planner_service",
        "server",
    }
    for name in CORE:
        link = ROOT / "rtplan" / name
        assert link.is_symlink() and link.readlink() == Path("..", name), name
    ancestors = set(CONTRACTS["acyclic"]["ancestors"])
    assert ancestors == {f"rtplan.{name}" for name in CORE} | set(PACKAGES)
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["rtplan*"]
    assert CONTRACTS["shipped-no-bench"]["source_modules"] == ["rtplan"]


def _bare_imports(path: Path) -> list[str]:
    """The imports in `path` of a core package by its bare name (`import games`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in CORE
        ]
    return found


def test_no_module_imports_a_core_package_by_its_bare_name():
    """From a checkout `games` would import too (its folder is on the path), as a second copy
    of every module beside `rtplan.games`: state, registries and jit caches split in two."""
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    bare = [
        f for name in files if not name.startswith("archive/") for f in _bare_imports(ROOT / name)
    ]
    assert not bare, bare


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """The checked packages (the core folders and rtplan with its links) and pyproject.toml,
    copied."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copy(ROOT / "pyproject.toml", root)
    for package in [*PACKAGES, *CORE]:
        ignore = shutil.ignore_patterns("__pycache__", "*.md", "*.proto")
        shutil.copytree(ROOT / package, root / package, ignore=ignore, symlinks=True)
    return root


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("server/_breach.py", "import rtplan.planner_service", {"layers"}),
        ("planner_service/_breach.py", "from rtplan.server import Settings", {"layers"}),
        ("planner/_breach.py", "from rtplan import wire", {"layers", "core-no-services"}),
        ("games/_breach.py", "import rtplan.planner", {"layers", "acyclic"}),
        ("harness/_breach.py", "import rtplan.games", {"layers"}),
        ("planner/_breach.py", "import grpc", {"core-no-services"}),
        ("harness/_breach.py", "import fastapi", {"core-no-services"}),
        ("server/_breach.py", "import bench", {"shipped-no-bench"}),
        ("rtplan/_breach.py", "import jax", set()),  # not the agent library: allowed
        ("rtplan/client.py", "from rtplan import via_services", {"layers", "client-no-jax"}),
        ("rtplan/live.py", "from rtplan.commands import SECTIONS", {"layers", "acyclic"}),
        # (and a cycle: the env server imports rtplan.processes for `bind_error` and its keys;
        # the arena imports it for its keys, so it would reach the env server's code)
        (
            "rtplan/processes/_services.py",
            "import rtplan.server",
            {"layers", "over-the-wire", "arena-over-the-wire", "acyclic"},
        ),
        ("rtplan/jax_setup.py", "from rtplan import client", set()),  # below it: allowed
        ("server/_breach.py", "from rtplan import processes", set()),  # above it: allowed
        ("rtplan/client.py", "import jax", {"client-no-jax"}),
        ("rtplan/wire.py", "import flax", {"client-no-jax"}),
        ("rtplan/gym.py", "import jax", {"client-no-jax"}),
        ("rtplan/examples/random_agent.py", "import jax", {"client-no-jax"}),
        ("rtplan/examples/random_agent.py", "from rtplan import processes", {"layers"}),
        ("planner_service/_admission.py", "from rtplan.planner_service import server", {"acyclic"}),
        ("planner_service/_loading.py", "from rtplan.planner_service import engine", {"acyclic"}),
        ("rtplan/gtp/_time.py", "from rtplan.gtp import _engine", {"acyclic"}),
        ("gate/clock/train.py", "from rtplan.gate.committed import policy", {"gate-kinds"}),
        (
            "gate/committed/train.py",
            "from rtplan.gate.evaluation import report",
            {"gate-kinds", "acyclic"},
        ),
        ("gate/ppo.py", "from rtplan.gate.clock import network", {"gate-kinds", "acyclic"}),
        (
            "rtplan/via_services/clock.py",
            "from rtplan.server.replay import ReplayFile",
            {"over-the-wire"},
        ),
        ("rtplan/deploy/_play.py", "import rtplan.planner_service", {"over-the-wire"}),
        # The arena: a service of its own, over the wire to the others, storage in one module.
        ("arena/_breach.py", "import rtplan.server", {"layers", "arena-over-the-wire"}),
        (
            "arena/agents.py",
            "from rtplan.planner_service import engine",
            {"layers", "arena-over-the-wire"},
        ),
        ("server/_breach.py", "from rtplan.arena import agents", {"layers"}),
        ("planner_service/_breach.py", "import rtplan.arena", {"layers"}),
        ("games/_breach.py", "import rtplan.arena", {"layers", "core-no-services"}),
        ("harness/_breach.py", "import sqlalchemy", {"core-no-services"}),
        ("rtplan/client.py", "from rtplan.arena import identity", {"layers"}),
        ("arena/agents.py", "import sqlalchemy", {"arena-storage"}),
        ("arena/_routes_agents.py", "from alembic import command", {"arena-storage"}),
        ("arena/app.py", "import psycopg", {"arena-storage"}),
        ("arena/repository.py", "from rtplan.arena import app", {"acyclic"}),
        ("arena/_breach.py", "from rtplan import client, v1, wire", set()),  # the wire: allowed
        ("arena/_breach.py", "from rtplan.harness import stats", set()),  # below it: allowed
        ("rtplan/commands/arena.py", "from rtplan.arena import app", set()),  # above: allowed
    ],
)
def test_a_breach_fails_its_contract(tree_copy, module, line, broken):
    path = tree_copy / module
    before = path.read_text() if path.exists() else None
    # Inside a function, as lazy imports are: they count too.
    path.write_text((before or "") + f"\n\ndef _breach():\n    {line}\n")
    try:
        result = lint_imports(tree_copy)
    finally:
        if before is None:
            path.unlink()
        else:
            path.write_text(before)
    out = result.stdout + result.stderr
    assert result.returncode == (1 if broken else 0), out
    assert {c for c, spec in CONTRACTS.items() if f"{spec['name']} BROKEN" in out} == broken, out
    if broken:  # the report names the importing module
        assert Path(module).stem in out, out


def test_an_import_for_annotations_only_counts_too(tree_copy):
    """An import under TYPE_CHECKING is a dependency all the same: the options <-> actors circle
    once hid there (actors names `OptionOutput` in its annotations)."""
    path = tree_copy / "planner/options.py"
    before = path.read_text()
    guarded = (
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from rtplan.planner.actors import Actors\n"
    )
    path.write_text(before + "\n\n" + guarded)
    try:
        result = lint_imports(tree_copy)
    finally:
        path.write_text(before)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"{CONTRACTS['acyclic']['name']} BROKEN" in out, out
    assert ".options -> .actors" in out, out
