"""bench.strength_race's logic: snapshot times, run specs, CPU seconds."""

from __future__ import annotations

import os

import pytest

from bench import strength_race as race


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
