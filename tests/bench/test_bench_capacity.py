"""bench/bench_capacity.py: its tiny mode (a tiny Snake planner and gate, one FPS, one replica, a
second of frames per session) starts both modes' services and ramps real gated sessions."""

from __future__ import annotations

import csv

import pytest

from bench.bench_capacity import FIELDS, held, main
from support import write_gate, write_planner


@pytest.mark.slow  # a benchmark's own tool, 42 s of services on a cold CI machine
def test_the_tiny_ramp_measures_both_modes_and_writes_their_rows(tmp_path, capsys):
    game = "snake-rt-v0"
    ckpt = write_planner(tmp_path / "ckpt", game, budgets=(1, 2), simulations=(2, 4))
    write_gate(ckpt, game)
    out = tmp_path / "capacity.csv"
    argv = ["--games", game, "--fps", "20", "--replicas", "1", "--sessions", "1", "2"]
    argv += ["--seconds", "1", "--max-batch", "2", "--checkpoint-dir", str(ckpt)]
    assert main([*argv, "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == list(FIELDS)
    assert {r["mode"] for r in rows if r["sessions"] == "1"} == {"before", "after"}
    for r in rows:
        assert int(r["episodes"]) >= int(r["sessions"]) and int(r["landings"]) > 0, r
        assert int(r["landings"]) == int(r["planned"]) + int(r["misses"]) + int(r["errors"])
        assert 0 <= float(r["miss_pct"]) <= 100 and float(r["load1"]) >= 0
    assert "| snake-rt-v0 | 20 | 1 | " in capsys.readouterr().out


def test_held_is_the_largest_n_before_the_first_failure():
    rows = [
        {"mode": "after", "sessions": n, "held": ok}
        for n, ok in ((1, True), (2, True), (4, False), (8, True))
    ]
    assert held(rows, "after") == 2 and held(rows, "before") == 0
