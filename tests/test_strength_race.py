"""bench/strength_race.py's logic: snapshot times, run specs, CPU seconds."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location(
        "strength_race", ROOT / "bench" / "strength_race.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


race = _load()


def test_snapshots_fall_due_at_each_multiple_of_the_interval_once():
    assert race.due_snapshots(899.0, 15, set()) == []
    assert race.due_snapshots(900.0, 15, set()) == [15]
    # A run resumed late (or a slow poll) takes every snapshot it passed, each once.
    assert race.due_snapshots(2000.0, 15, {15}) == [30]
    assert race.due_snapshots(3700.0, 15, set()) == [15, 30, 45, 60]
    assert race.snapshot_name("conv32x3", 45) == "conv32x3-045min.msgpack"


def test_run_specs_split_name_and_flags():
    runs = race.parse_runs(["mlp=--symmetries", "conv=--torso conv --channels 32"])
    assert runs == {"mlp": ["--symmetries"], "conv": ["--torso", "conv", "--channels", "32"]}
    with pytest.raises(SystemExit, match="NAME=FLAGS"):
        race.parse_runs(["--symmetries"])
    with pytest.raises(SystemExit, match="twice"):
        race.parse_runs(["a=", "a=--symmetries"])


def test_cpu_seconds_of_a_process_grow_with_its_work():
    before = race.process_cpu_seconds(os.getpid())
    deadline = race.time.process_time() + 0.3
    while race.time.process_time() < deadline:
        pass
    assert race.process_cpu_seconds(os.getpid()) >= before + 0.2
