"""The clock games' counterfactual values (`gate.counterfactual.clock`): the played budget's
branch is the game as played, every option shares its world's keys, the cross-fit scores a pick
on the other worlds only, and `rtplan counterfactual --t0` writes and resumes."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from rtplan.gate.counterfactual import clock as cc
from rtplan.gate.counterfactual.values import cross_fitted_gain
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.matches import match_start, option_player, play_match, play_on
from support import tiny_config, write_checkpoints

GAME = "speed-hex-v0"  # tiny config: budgets (2, 4), T0 12 ticks
T0, K = 12, 2


@pytest.fixture(scope="module")
def setup():
    planner = Planner(tiny_config(GAME))
    params = planner.init_params(jax.random.PRNGKey(0))
    # Groups pad to 1 or 32 games: a game's result does not depend on its group's size, and
    # each size is one more compile per budget and batch.
    runner = OptionRunner(planner, max_batch=32, growth=32.0)
    seeds = np.arange(3)
    states, keys, kept = cc.clock_positions(
        planner, params, runner, seeds, K, initial_time=T0, max_ply=8, rng=np.random.default_rng(1)
    )
    cbv = cc.clock_branch_values(
        planner, params, runner, states, keys, continuation=K, worlds=2, max_plies=200
    )
    return planner, params, runner, states, keys, kept, cbv


def test_the_played_budgets_branch_is_the_game_as_played(setup):
    """World 0's branch of K from each position is the rest of `play_match`'s always-K game
    (both sides) from the same seed: its result for the mover and its length."""
    planner, params, runner, states, _, kept, cbv = setup
    assert len(kept) >= 2
    j = cbv.budgets.index(K)
    played = play_match(
        planner,
        params,
        option_player(planner, K),
        option_player(planner, K),
        kept,
        initial_time=T0,
        max_plies=200,
    )
    n = len(kept)
    first = played.returns[:n]  # A moved first: player id of the mover at the opening's end
    start, _ = match_start(planner, kept, T0)
    a = np.asarray(start.current_player)
    mover_is_a = np.asarray(states.current_player) == a
    want = np.where(mover_is_a, first, 1.0 - first)
    np.testing.assert_array_equal(cbv.values[:, 0, j], want)
    np.testing.assert_array_equal(np.asarray(states.frame) + cbv.plies[:, 0, j], played.frames[:n])


def test_play_on_stopped_and_resumed_equals_played_through(setup):
    planner, params, runner, *_ = setup
    states, keys = match_start(planner, np.arange(3), T0)
    choose = cc._chooser(planner, K)
    pick = lambda i, s, o, k: choose(s, o, k)  # noqa: E731
    whole = play_on(planner, params, states, keys, pick, max_plies=10, runner=runner)
    half = play_on(
        planner, params, states, keys, pick, max_plies=10, until=np.array([3, 6, 0]), runner=runner
    )
    rest = play_on(
        planner, params, half[0], half[1], pick, max_plies=10, until=10 - half[3], runner=runner
    )
    for x, y in zip(jax.tree.leaves(whole[0]), jax.tree.leaves(rest[0]), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(whole[1]), np.asarray(rest[1]))


def test_every_option_shares_its_worlds_keys():
    keys = jax.vmap(jax.random.PRNGKey)(np.arange(3))
    worlds = np.asarray(cc.branch_keys(keys, 3))
    assert worlds.shape == (3, 3, 2)
    np.testing.assert_array_equal(worlds[:, 0], np.asarray(keys))  # world 0: as played
    assert len({tuple(k) for k in worlds.reshape(-1, 2)}) == 9  # distinct streams otherwise


def test_the_branches_are_paired_and_fit_the_clock(setup):
    """Options of one position and world start from one state and one key stream, so an
    option that falls down to another budget (or a search the clock cannot pay) plays the
    same game as that budget: identical values and lengths."""
    *_, states, _, _, cbv = setup
    assert cbv.values.shape == (len(cbv.values), 2, 3) and cbv.budgets == (0, 2, 4)
    assert set(np.unique(cbv.values)) <= {0.0, 0.5, 1.0}
    np.testing.assert_array_equal(cbv.played[:, 0], 0)
    for s, row in enumerate(cbv.played):
        for j, b in enumerate(row):
            i = cbv.budgets.index(int(b))
            np.testing.assert_array_equal(cbv.values[s, :, j], cbv.values[s, :, i])
            np.testing.assert_array_equal(cbv.plies[s, :, j], cbv.plies[s, :, i])


def test_the_cross_fit_scores_each_pick_on_the_other_worlds():
    """One state, four worlds, options (c, a): worlds 0-1 favour a by 1, worlds 2-3 disfavour
    it by 1. Picked on one half and scored on the other, both ways: (-1 + 0) / 2; scoring a
    pick on its own worlds would give +1 / 2."""
    values = np.array([[[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]])
    np.testing.assert_allclose(cross_fitted_gain(values, 0), [-0.5])


def test_uncertainty_and_bins(setup):
    planner, params, runner, states, *_ = setup
    feats = cc.uncertainty(planner, params, runner, states, jax.random.PRNGKey(0))
    assert set(feats) == set(cc.FEATURES)
    n = states.frame.shape[0]
    assert all(v.shape == (n,) for v in feats.values())
    assert np.all(feats["policy_entropy"] > 0) and np.all(feats["prior_gap"] >= 0)
    assert set(np.unique(feats["large_changes_move"])) <= {0.0, 1.0}
    # The improved policy's gap, not the visits' (sequential halving evens out the last two).
    for name in ("search_gap_small", "search_gap_large"):
        assert np.all((feats[name] >= 0) & (feats[name] <= 1)) and feats[name].max() > 0, feats
    x = np.arange(10.0)
    parts = cc.bins(x, 4)
    assert sum(int(m.sum()) for *_, m in parts) == 10  # every value in exactly one bin
    assert [lo for lo, _, _ in cc.bins(np.array([0.0, 1.0, 1.0]))] == [0.0, 1.0]


@pytest.mark.slow  # ~60 s: loads its own planner, so compiles its own runner
def test_the_cli_writes_and_resumes(tmp_path, capsys):
    from rtplan.cli import main

    write_checkpoints(tmp_path / "ck", (GAME,))
    planner = tmp_path / "ck" / GAME / "planner.msgpack"
    argv = ["counterfactual", "--game", GAME, "--t0", str(T0), "--continuation", str(K)]
    argv += ["--states", "2", "--worlds", "2", "--chunk", "1", "--max-ply", "6"]
    argv += ["--max-plies", "20", "--planner", str(planner), "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    folder = tmp_path / "r" / GAME / "counterfactual" / f"t{T0}-k{K}-w2-p6-s0"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["continuation"] == K and summary["initial_time"] == T0
    assert "cross_fitted_oracle_gain" in summary and summary["options"] == ["k0", "k2", "k4"]
    header = (folder / "by-feature.csv").read_text().splitlines()[0]
    assert header == "feature,low,high,positions,option,mean,se"
    chunks = sorted(folder.glob("chunk-*.json"))
    assert len(chunks) == 2
    stamp = [c.stat().st_mtime_ns for c in chunks]
    capsys.readouterr()
    assert main(argv) == 0  # resumed: no chunk is recomputed
    assert [c.stat().st_mtime_ns for c in chunks] == stamp
    assert "positions in" not in capsys.readouterr().out
    assert main([*argv[:2], GAME, "--t0", "12", "--horizon", "3"]) != 0
