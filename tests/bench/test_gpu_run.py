"""bench/gpu/run.sh, the GPU run (issue 42 item 4): its tiny mode runs every step on this CPU, so
the script a GPU session runs in one go cannot rot; its wheel list pins what the suite tests."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import write_planner

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "gpu" / "run.sh"


def _name(req: str) -> str:
    """A requirement's distribution name, normalised (PEP 503), without its extras."""
    return re.sub(r"[-_.]+", "-", req.split("==")[0].split("[")[0]).lower()


def _tiny_planner(tmp_path: Path) -> Path:
    """One budget: the tiny run measures only k=1, and the services its deploy step starts
    compile every budget of the planner. The same planner as tests/rtplan/test_demo_stop.py's:
    its programs compile once in a run."""
    return write_planner(tmp_path / "ckpt", "snake-rt-v0", budgets=(1,), simulations=(2,))


def _check_tiny_run(out: Path) -> None:
    """What the tiny run wrote under `out`: every step, on this CPU."""
    (folder,) = out.iterdir()
    assert folder.name == "cpu-cpu"  # <platform>-<device kind>
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["left_out"] == {} and len(summary["done"]) == 4, summary
    assert summary["device"]["platform"] == "cpu"
    rows = list(csv.DictReader((folder / "search_latency.csv").open()))
    assert {(r["game"], r["k"], r["batch"]) for r in rows} == {
        ("snake-rt-v0", "1", "1"),
        ("snake-rt-v0", "1", "2"),
    }
    assert all(float(r["p95_ms"]) >= float(r["p50_ms"]) > 0 for r in rows)
    ladder = summary["deploy"]["snake-rt-v0"]
    assert list(ladder) == ["8.0"] and 0 <= ladder["8.0"]["miss_rate"] <= 1
    assert (folder / "deploy" / "snake-rt-v0" / "deploy.csv").is_file()
    (train,) = csv.DictReader((folder / "train_throughput.csv").open())
    assert float(train["frames_per_s"]) > 0


@pytest.mark.slow  # ~45 s: two services and a training run in subprocesses
def test_the_tiny_run_measures_every_step_and_names_the_device(tmp_path):
    """The whole tiny run as a GPU session runs it (`run.sh`), every subprocess real.

    Slow suite: its steps are covered in the default suite by
    `test_the_tiny_runs_steps_fit_the_commands_they_call` (measure.py's steps in process, the
    command lines of its subprocesses parsed by rtplan's own parser, the files read as their
    writers name the columns; run.sh starting measure.py), tests/rtplan/test_deploy_command.py
    (`rtplan deploy` end to end) and tests/planner/test_train.py (`rtplan train-planner`)."""
    ckpt = _tiny_planner(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(
        ["bash", str(RUN), "--tiny", "--checkpoint-dir", str(ckpt), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=500, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _check_tiny_run(out)


def _write_csv(path: Path, fields, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def test_the_tiny_runs_steps_fit_the_commands_they_call(tmp_path, monkeypatch):
    """The tiny run in this process, its two subprocesses (`rtplan deploy`, `rtplan
    train-planner`) faked: each command line must parse with rtplan's own parser, and the fake
    writes what the command writes with the columns its writer names (`CSV_FIELDS`, `HEAD`), so
    measure.py reads only columns that exist. run.sh starts measure.py (its --help)."""
    from bench.gpu import measure
    from rtplan.cli import build_parser
    from rtplan.deploy._tables import CSV_FIELDS
    from rtplan.harness.run import HEAD

    called = []

    def run(argv, **kwargs):
        assert argv[:3] == [sys.executable, "-m", "rtplan"], argv
        try:
            args = build_parser().parse_args(argv[3:])
        except SystemExit:
            raise AssertionError(f"rtplan refuses the command line {argv[3:]}") from None
        called.append(args.command)
        out = Path(args.out)
        if args.command == "deploy":
            rows = [{**dict.fromkeys(CSV_FIELDS, 0.5), "fps": fps} for fps in args.fps]
            _write_csv(out / "deploy.csv", CSV_FIELDS, rows)
        else:
            rows = [{**dict.fromkeys(HEAD, 7.0), "iteration": i} for i in range(args.iterations)]
            _write_csv(out / "log.csv", HEAD, rows)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(measure, "subprocess", SimpleNamespace(run=run))
    out = tmp_path / "out"
    argv = ["--tiny", "--checkpoint-dir", str(_tiny_planner(tmp_path)), "--out", str(out)]
    assert measure.main(argv) == 0
    assert called == ["deploy", "train-planner"]
    _check_tiny_run(out)
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(RUN), "--help"], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "--tiny" in done.stdout, done.stderr[-3000:]


def test_a_python_without_the_packages_and_no_wheels_is_told_what_to_run(tmp_path):
    bare = shutil.which("python3")
    probe = subprocess.run([bare, "-c", "import mctx"], capture_output=True, check=False)
    if bare is None or probe.returncode == 0:
        pytest.skip("no python3 that lacks rtplan's packages")
    env = {**os.environ, "PYTHON": bare, "RTPLAN_GPU_WHEELS": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    run = subprocess.run(["bash", str(RUN), "--tiny"], env=env, capture_output=True, text=True)
    assert run.returncode == 2
    assert "has no wheels: run bash bench/gpu/wheels.sh first" in run.stderr, run.stderr


def test_the_wheel_list_pins_the_versions_the_suite_runs():
    reqs = [
        line.strip()
        for line in (ROOT / "bench" / "gpu" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = {_name(r): r.split("==")[1] for r in pyproject["project"]["dependencies"]}
    for req in reqs:
        name, version = _name(req), req.split("==")[1]
        assert pinned.get(name, version) == version, (req, pinned[name])
        assert metadata.version(name) == version, req  # what this suite imports
    # Every runtime dependency is either preinstalled on the GPU machine or in the list.
    preinstalled = {"jax", "jaxlib", "flax", "optax", "grpcio", "numpy", "msgpack", "protobuf",
                    "rich"}  # fmt: skip
    listed = {_name(r) for r in reqs}
    assert set(pinned) - listed - preinstalled == set()
