"""`planner.configs.with_budgets`: larger budgets at the checkpoint's simulations per frame, its
own budgets unchanged, and the configs it refuses."""

from __future__ import annotations

import dataclasses

import pytest

from rtplan.planner.configs import with_budgets
from support import tiny_config


def _config(budgets=(1, 2, 3, 4), simulations=(32, 64, 96, 128)):
    return dataclasses.replace(tiny_config("snake-rt-v0"), budgets=budgets, simulations=simulations)


def test_new_budgets_search_at_the_checkpoints_simulations_per_frame():
    cfg = _config()
    more = with_budgets(cfg, [1, 2, 3, 4, 6, 8])
    assert more.budgets == (1, 2, 3, 4, 6, 8)
    assert more.simulations == (32, 64, 96, 128, 192, 256)
    for k in cfg.budgets:  # the checkpoint's own keep theirs
        assert more.sims(k) == cfg.sims(k)
    assert dataclasses.replace(more, budgets=cfg.budgets, simulations=cfg.simulations) == cfg
    assert with_budgets(cfg, cfg.budgets) == cfg
    # Budgets between the checkpoint's own, and a checkpoint at 2 simulations per frame.
    small = _config(budgets=(1, 4), simulations=(2, 8))
    assert with_budgets(small, (1, 2, 4, 5)).simulations == (2, 4, 8, 10)


@pytest.mark.parametrize(
    ("budgets", "match"),
    [
        ((), r"budgets must be >= 1 frame each, got \[\]"),
        ((0, 1, 2, 3, 4), "budgets must be >= 1 frame each"),
        ((1, 2, 4, 3), r"ascending and distinct, got \[1, 2, 4, 3\]"),
        ((1, 2, 3, 4, 4), "ascending and distinct"),
        ((1, 2, 4, 6), r"leave out the checkpoint's \[3\]: give all of \[1, 2, 3, 4\]"),
    ],
)
def test_budgets_it_refuses(budgets, match):
    with pytest.raises(ValueError, match=match):
        with_budgets(_config(), budgets)


def test_checkpoints_it_refuses():
    with pytest.raises(ValueError, match=r"simulations \[16, 6\] are not one whole number per"):
        with_budgets(_config(budgets=(1, 3), simulations=(16, 6)), (1, 3, 4))
    with pytest.raises(ValueError, match="not one whole number per frame"):
        with_budgets(_config(budgets=(2, 4), simulations=(3, 6)), (2, 4, 6))
    with pytest.raises(ValueError, match="speed-hex-v0 is a clock game"):
        with_budgets(tiny_config("speed-hex-v0"), (2, 4, 8))
