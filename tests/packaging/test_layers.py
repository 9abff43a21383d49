"""The import contracts in pyproject.toml: the tree keeps them, and each breach fails them."""

from __future__ import annotations

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


def test_every_top_level_package_is_checked_and_shipped():
    """A new top-level package (the gate, say) must join the contracts and the wheel; bench/
    joins the contracts only (it runs from a checkout) and nothing shipped may import it."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert found == set(PACKAGES) == set(CONTRACTS["acyclic"]["ancestors"])
    shipped = {
        p.removesuffix("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    assert shipped == found - {"bench"}
    assert set(CONTRACTS["shipped-no-bench"]["source_modules"]) == shipped


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """The checked packages and pyproject.toml, copied."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copy(ROOT / "pyproject.toml", root)
    for package in PACKAGES:
        ignore = shutil.ignore_patterns("__pycache__", "*.md", "*.proto")
        shutil.copytree(ROOT / package, root / package, ignore=ignore)
    return root


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("server/_breach.py", "import planner_service", {"layers"}),
        ("planner_service/_breach.py", "from server import Settings", {"layers"}),
        ("planner/_breach.py", "from rtplan import wire", {"layers", "core-no-services"}),
        ("games/_breach.py", "import planner", {"layers"}),
        ("harness/_breach.py", "import games", {"layers"}),
        ("planner/_breach.py", "import grpc", {"core-no-services"}),
        ("harness/_breach.py", "import fastapi", {"core-no-services"}),
        ("server/_breach.py", "import bench", {"shipped-no-bench"}),
        ("rtplan/_breach.py", "import jax", set()),  # not the agent library: allowed
        ("rtplan/client.py", "from rtplan import via_services", {"layers", "client-no-jax"}),
        ("rtplan/live.py", "from rtplan.commands import GROUPS", {"layers", "acyclic"}),
        ("rtplan/processes/_services.py", "import server", {"layers", "over-the-wire"}),
        ("rtplan/jax_setup.py", "from rtplan import client", set()),  # below it: allowed
        ("server/_breach.py", "from rtplan import processes", set()),  # above it: allowed
        ("rtplan/client.py", "import jax", {"client-no-jax"}),
        ("rtplan/wire.py", "import flax", {"client-no-jax"}),
        ("rtplan/gym.py", "import jax", {"client-no-jax"}),
        ("planner_service/_admission.py", "from planner_service import server", {"acyclic"}),
        ("planner_service/_loading.py", "from planner_service import engine", {"acyclic"}),
        ("rtplan/gtp/_time.py", "from rtplan.gtp import _engine", {"acyclic"}),
        ("gate/clock/train.py", "from gate.committed import policy", {"gate-kinds"}),
        (
            "gate/committed/train.py",
            "from gate.evaluation import report",
            {"gate-kinds", "acyclic"},
        ),
        ("gate/ppo.py", "from gate.clock import network", {"gate-kinds", "acyclic"}),
        ("rtplan/via_services/clock.py", "from server.replay import ReplayFile", {"over-the-wire"}),
        ("rtplan/deploy/_play.py", "import planner_service", {"over-the-wire"}),
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
        "if TYPE_CHECKING:\n    from planner.actors import Actors\n"
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
