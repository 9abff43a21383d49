"""The one seed policy and episode player: disjoint seed ranges, clock matches equal a plain
loop and draw their openings from their seeds, committed play counts returns to the end."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan import games
from rtplan.planner import Planner
from rtplan.planner.calibrate import _quality, with_sims
from rtplan.planner.episodes import (
    EVAL_SEED_BASE,
    SEED_RANGES,
    TUNING_SEED_BASE,
    always,
    eval_runner,
    play,
    seeds_of,
    split_of,
)
from rtplan.planner.matches import REFLEX, option_player, play_match
from support import tiny_config


def test_seed_ranges_are_disjoint_and_fixed():
    names = list(SEED_RANGES)
    assert names == ["train", "tuning", "eval", "holdout"]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ra, rb = SEED_RANGES[a], SEED_RANGES[b]
            assert max(ra.start, rb.start) >= min(ra.stop, rb.stop), (a, b)
    tuning, evaluation = seeds_of("tuning", 100), seeds_of("eval", 100)
    assert tuning[0] == TUNING_SEED_BASE == 1_000_000 and evaluation[0] == EVAL_SEED_BASE
    assert list(evaluation[:2]) == [2_000_000, 2_000_001]
    assert {split_of(int(s)) for s in tuning} == {"tuning"}
    assert {split_of(int(s)) for s in evaluation} == {"eval"}
    assert split_of(0) == "train" and split_of(999_999) == "train"
    # The pre-registered evaluation's seeds: none of them is a seed any earlier number used.
    holdout = seeds_of("holdout", 400)
    assert holdout[0] == 2_500_000 and {split_of(int(s)) for s in holdout} == {"holdout"}
    with pytest.raises(ValueError, match="split 'train' is not one of"):
        seeds_of("train", 3)
    with pytest.raises(ValueError, match="do not fit"):
        seeds_of("tuning", len(SEED_RANGES["tuning"]) + 1)


def test_eval_runner_compiles_a_bounded_set():
    planner = Planner(tiny_config("snake-rt-v0"))
    runner = eval_runner(planner, 100)
    # Doubling sizes: 1, 2, 4, ..., 128 -> 8 sizes per budget, whatever groups the play forms.
    assert runner.ladder == (1, 2, 4, 8, 16, 32, 64, 128)


def _hex():
    cfg = dataclasses.replace(tiny_config("speed-hex-v0"), budgets=(2,), simulations=(2,))
    params = {**dict(cfg.game_params), "initial_time": games.UNLIMITED_CLOCK}
    planner = Planner(dataclasses.replace(cfg, game_params=tuple(params.items())))
    return planner, planner.init_params(jax.random.PRNGKey(0))


def test_match_equals_a_plain_loop_on_its_seed():
    planner, params = _hex()
    seed = 5
    ep = play_match(
        planner, params, option_player(planner, 2), REFLEX, np.array([seed]), opening_plies=0
    )
    assert ep.seeds.tolist() == [seed, seed] and ep.returns.shape == (2,)

    option = jax.jit(planner.option, static_argnums=3)
    reflex = jax.jit(planner.reflex_action)
    step = jax.jit(jax.vmap(planner.game.step))
    for half, a_first in enumerate((True, False)):
        # Both games start from the seed's state, A first then second; keys from the seed.
        s = jax.vmap(planner.game.init)(jax.random.PRNGKey(seed)[None])
        key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)
        a_id = int(s.current_player[0]) if a_first else 1 - int(s.current_player[0])
        n_a = 0
        while not bool(s.done[0]):
            key, sub = jax.random.split(key)
            if int(s.current_player[0]) == a_id:
                out = option(params, sub[None], s, 2)
                a, c = out.actions[:, 0], out.cost
                n_a += 1
            else:
                a, c = reflex(params, s), jnp.zeros((1,), jnp.int32)
            s = step(s, a, c)
        assert ep.returns[half] == (float(s.inner.rewards[0, a_id]) + 1) / 2
        assert ep.frames[half] == int(s.frame[0]) and ep.decisions[half] == n_a
        assert set(ep.ks[half].tolist()) <= {2}


def test_match_openings_come_from_the_seeds_and_diversify_deterministic_players():
    planner, params = _hex()
    seeds = seeds_of("eval", 4)
    plain = play_match(planner, params, REFLEX, REFLEX, seeds, opening_plies=0)
    # Without openings a deterministic pair replays one game per colour ...
    assert len(set(plain.frames.tolist())) <= 2
    # ... with them the games differ, and an even opening keeps A's colour per half.
    opened = play_match(planner, params, REFLEX, REFLEX, seeds, opening_plies=6)
    assert len(set(opened.frames.tolist())) > 2
    assert ((opened.returns == 0) | (opened.returns == 1)).all()
    # A game is its seed's, whatever else shares the batch (seeds 1..2 alone, padded).
    alone = play_match(planner, params, REFLEX, REFLEX, seeds[1:3], opening_plies=6)
    np.testing.assert_array_equal(alone.frames, opened.frames[[1, 2, 5, 6]])
    np.testing.assert_array_equal(alone.returns, opened.returns[[1, 2, 5, 6]])
    with pytest.raises(ValueError, match="even"):
        _quality(planner, params, 2, 3, None, "eval")


def test_cross_eval_at_the_planners_simulations_is_the_always_k_condition():
    """`rtplan cross-eval` (one budget, its simulations) and `rtplan eval`'s condition k2 (the
    full planner) play the same episodes on the same split: identical per-episode returns."""
    cfg = tiny_config("snake-rt-v0")
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    seeds = seeds_of("eval", 3)
    # 12 decisions: every game stays in one group of 3 (fewer sizes to compile).
    condition = play(eval_runner(planner, 3), params, seeds, always(2), max_decisions=12)
    k, sims = 2, cfg.simulations[cfg.budgets.index(2)]
    cross = _quality(Planner(with_sims(cfg, k, sims)), params, k, 3, 12, "eval")
    np.testing.assert_array_equal(cross.seeds, condition.seeds)
    np.testing.assert_array_equal(cross.returns, condition.returns)
    np.testing.assert_array_equal(cross.frames, condition.frames)
    # Option k=2: two frames per decision until the game ends or the cap (the last may be cut
    # short).
    d = cross.decisions
    assert (cross.frames <= 2 * d).all() and (cross.frames >= 2 * d - 1).all()
    assert np.isfinite(cross.se)


def test_random_opening_plays_that_many_legal_moves():
    game = games.make("speed-hex-v0")
    plies = jnp.array([0, 1, 5, 9])
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    states = jax.vmap(game.init)(keys)
    opening = jax.jit(jax.vmap(lambda s, k, n: games.random_opening(game, s, k, n, max_plies=9)))
    out = opening(states, keys, plies)
    np.testing.assert_array_equal(out.frame, plies)
    # Every move put one stone on a distinct cell (an illegal move would not).
    stones = (np.asarray(out.inner.board._x.board) != 0).sum(axis=1)
    np.testing.assert_array_equal(stones, plies)
    assert (out.inner.clocks == states.inner.clocks).all()  # openings cost no clock time
