"""Calibration and cross-evaluation write their tables and plot (tiny sizes)."""

from __future__ import annotations

import csv
import dataclasses

import jax
import pytest

from rtplan.harness import checkpoint
from rtplan.planner import Planner, config_to_dict, default_config
from rtplan.planner.calibrate import calibrate, cross_eval
from rtplan.planner.network import NetworkConfig
from rtplan.planner.store import load_planner

TINY = NetworkConfig(
    channels=4, blocks=1, features=8, value_hidden=8, value_bins=11, value_max=20.0, time_input=True
)


def _tiny_checkpoint(path, train_k=1):
    cfg = dataclasses.replace(
        default_config("snake-rt-v0"), network=TINY, game_params=(("num_rows", 6), ("num_cols", 6))
    )
    params = Planner(cfg).init_params(jax.random.PRNGKey(0))
    checkpoint.save(
        path,
        {"params": params},
        {"planner_config": config_to_dict(cfg), "train_config": {"train_k": train_k}},
    )
    return str(path)


@pytest.mark.slow  # ~30 s: every simulation count compiles; a tool, not a service path
def test_calibrate_writes_csv_and_png(tmp_path):
    path = _tiny_checkpoint(tmp_path / "p.msgpack")
    rows = calibrate(
        "snake-rt-v0",
        checkpoint=path,
        sims=[2, 4],
        episodes=2,
        max_decisions=4,
        calls=2,
        out_dir=tmp_path / "cal",
    )
    assert [r["simulations"] for r in rows] == [2, 4]
    assert all(
        r["latency_ms_median"] > 0 and r["latency_ms_p95"] >= r["latency_ms_median"] for r in rows
    )
    with open(tmp_path / "cal" / "calibration.csv") as f:
        assert len(list(csv.DictReader(f))) == 2
    png = (tmp_path / "cal" / "calibration.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


@pytest.mark.slow  # ~22 s; test_calibrate_writes_csv_and_png covers the command
def test_cross_eval_grid(tmp_path):
    paths = [
        _tiny_checkpoint(tmp_path / "a.msgpack", None),  # the default: k=1 (committed games)
        _tiny_checkpoint(tmp_path / "b.msgpack", 2),
    ]
    rows = cross_eval(
        "snake-rt-v0",
        checkpoints=paths,
        eval_ks=[1, 2],
        sims_per_frame=[2],
        episodes=2,
        max_frames=3,
        out_dir=tmp_path / "x",
    )
    # Every eval-k plays the same 3-frame horizon: 3 options of 1 frame, or 2 of 2 frames.
    assert [(r["train_k"], r["eval_k"], r["simulations"], r["max_decisions"]) for r in rows] == [
        (1, 1, 2, 3),
        (1, 2, 4, 2),
        (2, 1, 2, 3),
        (2, 2, 4, 2),
    ]
    # Same params and paired seeds: both checkpoints score the same at each condition.
    assert rows[0]["mean"] == rows[2]["mean"] and rows[1]["mean"] == rows[3]["mean"]


def test_checkpoint_for_another_game_is_refused(tmp_path):
    path = _tiny_checkpoint(tmp_path / "p.msgpack")
    with pytest.raises(ValueError, match="is for snake-rt-v0, not tetris-rt-v0"):
        load_planner("tetris-rt-v0", path)


def test_cli_errors_are_specific(tmp_path, capsys):
    from rtplan.cli import main

    assert main(["calibrate", "--game", "pong-v0"]) == 2
    assert "unknown game 'pong-v0'" in capsys.readouterr().err
    assert main(["calibrate", "--game", "snake-rt-v0", "--checkpoint", str(tmp_path / "x")]) == 2
    missing = tmp_path / "x"
    assert f"no planner checkpoint for snake-rt-v0 at {missing}" in capsys.readouterr().err
    bad = tmp_path / "bad.msgpack"
    bad.write_bytes(b"garbage")
    assert main(["cross-eval", "--game", "snake-rt-v0", "--checkpoints", str(bad)]) == 2
    assert "corrupt checkpoint" in capsys.readouterr().err
