"""Batched evaluation equals plain game loops."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from planner import Planner, default_config
from planner.evaluate import REFLEX, make_committed_eval, make_match_eval, to_result
from support import TINY_NET as TINY


def test_match_eval_equals_a_plain_loop():
    cfg = dataclasses.replace(
        default_config("speed-hex-v0"), network=TINY, budgets=(2,), simulations=(2,)
    )
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    run = jax.jit(make_match_eval(planner, ("option", 2), REFLEX, episodes=2))
    key = jax.random.PRNGKey(4)
    score, plies, moves = jax.device_get(run(params, params, key))

    option = jax.jit(planner.option, static_argnums=3)
    reflex = jax.jit(planner.reflex_action)
    step = jax.jit(jax.vmap(planner.game.step))
    open_key, *play_keys = jax.random.split(key, 3)
    for half, a_first in enumerate((True, False)):
        # Both halves start from the same opening (here: none), with A first then second.
        init_key = jax.random.split(open_key, 3)[0]
        s = jax.vmap(planner.game.init)(jax.random.split(init_key, 1))
        a_id = int(s.current_player[0]) if a_first else 1 - int(s.current_player[0])
        n_a = 0
        while not bool(s.done[0]):
            if int(s.current_player[0]) == a_id:
                out = option(params, jax.random.split(jax.random.PRNGKey(0), 1), s, 2)
                a, c = out.actions[:, 0], out.cost
                n_a += 1
            else:
                a, c = reflex(params, s), jnp.zeros((1,), jnp.int32)
            s = step(s, a, c)
        assert score[half] == (float(s.inner.rewards[0, a_id]) + 1) / 2
        assert plies[half] == int(s.frame[0]) and moves[half] == n_a


def test_match_eval_needs_an_even_number_of_episodes():
    planner = Planner(dataclasses.replace(default_config("speed-hex-v0"), network=TINY))
    with pytest.raises(ValueError, match="even"):
        make_match_eval(planner, REFLEX, REFLEX, episodes=3)


def test_committed_eval_counts_returns_until_done():
    cfg = dataclasses.replace(
        default_config("snake-rt-v0"),
        network=dataclasses.replace(TINY, value_bins=11, value_max=20.0, time_input=True),
        simulations=(2, 4, 6, 8),
        game_params=(("num_rows", 5), ("num_cols", 5)),
    )
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    res = to_result(
        *jax.jit(make_committed_eval(planner, 2, episodes=4, max_decisions=300))(
            params, jax.random.PRNGKey(1)
        )
    )
    assert res.returns.shape == (4,) and (res.returns >= 0).all()
    # Option k=2: two frames per decision until the game ends (the last may be cut short).
    assert (res.frames <= 2 * res.decisions).all() and (res.frames >= 2 * res.decisions - 1).all()
    assert np.isfinite(res.se)


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


def test_match_eval_openings_diversify_deterministic_players():
    planner = Planner(dataclasses.replace(default_config("speed-hex-v0"), network=TINY))
    params = planner.init_params(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(3)
    plain = jax.jit(make_match_eval(planner, REFLEX, REFLEX, episodes=8))
    opened = jax.jit(make_match_eval(planner, REFLEX, REFLEX, episodes=8, opening_plies=6))
    # Without openings a deterministic pair replays one game per colour ...
    assert len(set(np.asarray(plain(params, params, key)[1]).tolist())) <= 2
    # ... with them the games differ, and an even opening keeps A's colour per half.
    score, plies, moves = jax.device_get(opened(params, params, key))
    assert len(set(plies.tolist())) > 2
    assert ((score == 0) | (score == 1)).all()
