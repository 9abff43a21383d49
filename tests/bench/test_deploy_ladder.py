"""bench/deploy_ladder.py: the rows it assembles from the two sides' `rtplan deploy` files, and
the captions the results page gives what it writes."""

from __future__ import annotations

import csv

from bench.deploy_ladder import BREAKING, LADDERS, ladder_rows
from rtplan.harness.layout import describe_result

DEPLOY_FIELDS = ("fps", "episodes", "return_mean", "miss_rate", "misses", "landings")


def _deploy_csv(folder, rows):
    folder.mkdir(parents=True)
    with (folder / "deploy.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DEPLOY_FIELDS)
        writer.writeheader()
        writer.writerows(dict(zip(DEPLOY_FIELDS, r, strict=True)) for r in rows)


def test_a_row_per_fps_both_sides_played_with_each_sides_misses_and_return(tmp_path):
    _deploy_csv(tmp_path / "before", [(96.0, 5, 20.0, 1.0, 50, 50), (120.0, 5, 0.0, 1.0, 40, 40)])
    _deploy_csv(tmp_path / "after", [(96.0, 5, 120.0, 0.25, 12, 48), (100.0, 5, 1, 0, 0, 9)])
    (row,) = ladder_rows(2, "tetris-rt-v0", tmp_path / "before", tmp_path / "after")
    assert row == {
        "run": 2,
        "fps": 96.0,
        "x_breaking": 1.2,  # Tetris' last FPS within 5% misses was 80
        "before_miss_rate": 1.0,
        "before_misses": 50,
        "before_landings": 50,
        "before_return": 20.0,
        "after_miss_rate": 0.25,
        "after_misses": 12,
        "after_landings": 48,
        "after_return": 120.0,
    }


def test_every_ladder_reaches_past_1_25x_its_breaking_fps_and_its_files_have_captions():
    for game, rungs in LADDERS.items():
        assert min(rungs) <= BREAKING[game] and max(rungs) >= 1.25 * BREAKING[game], game
    quiet = "tetris-rt-v0/deploy/no-cliff/quiet"
    for rel in (f"{quiet}/ladder.csv", f"{quiet}/run1/before/deploy.csv"):
        assert describe_result(rel).command == "python -m bench.deploy_ladder", rel
    for rel in (f"{quiet}/run2/after/fps_100.json", "snake-rt-v0/deploy/no-cliff/ladder.csv"):
        assert "no-cliff" in describe_result(rel).shows, rel
