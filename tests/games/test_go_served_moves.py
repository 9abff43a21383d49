"""Speed Go's served moves (`SpeedGo.served_mask`): no pass while the game is open."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rtplan.games import make
from rtplan.games.go import PASS, parse_vertex


@pytest.fixture(scope="module")
def go():
    game = make("speed-go-v0", initial_time=0)  # both clocks out: every move is a reflex move
    return game, jax.jit(game.init), jax.jit(game.step), jax.jit(game.served_mask)


def _play(go, vertices: str):
    """The state after `vertices` (space-separated GTP vertices, alternating from black)."""
    _, init, step, _ = go
    state = init(jax.random.key(0))
    for v in vertices.split():
        state = step(state, parse_vertex(v))
        assert not bool(state.terminated), v
    return state


def test_no_pass_on_the_empty_board_and_every_point_is_served(go):
    mask = np.asarray(go[3](_play(go, "")))
    assert not mask[PASS]
    assert mask[:PASS].all()


def test_a_pass_that_ends_the_game_is_served_only_when_it_wins(go):
    # Black passed on the empty board: white's pass ends the game and wins by komi.
    assert np.asarray(go[3](_play(go, "pass")))[PASS]
    # Black then white played one stone each (an even count) and white passed: black's pass
    # ends the game 1-1 against komi 7.5, a loss.
    assert not np.asarray(go[3](_play(go, "pass E5 D5 pass")))[PASS]


def test_an_own_eye_is_not_served(go):
    # Black walls off the corner point A9 (B9, A8, B8 black); white plays far away.
    state = _play(go, "B9 J1 A8 J2 B8 H1")
    mask = np.asarray(go[3](state))
    assert np.asarray(state.legal_action_mask)[parse_vertex("A9")]
    assert not mask[parse_vertex("A9")], "black fills its own eye"
    assert mask[parse_vertex("E5")] and not mask[PASS]


def test_a_self_atari_is_not_served(go):
    # A lone black stone at A1 beside white's B1 has one liberty (A2): a self-atari.
    state = _play(go, "E5 B1 E6")  # black E5, white B1, black E6; white to move
    state = go[2](state, parse_vertex("J9"))  # white elsewhere; black to move
    mask = np.asarray(go[3](state))
    assert np.asarray(state.legal_action_mask)[parse_vertex("A1")]
    assert not mask[parse_vertex("A1")], "A1 has one liberty after the move"
    assert mask[parse_vertex("A2")]


def test_a_game_with_both_clocks_out_never_passes_while_it_is_open(go):
    """Both sides move by reflex with a policy that always prefers pass (the raw argmax of the
    shipped network passes on the empty board): the served moves play the board's points until
    none is sensible, and the game still ends, scored (two passes or pgx's 162-ply cap)."""
    game, init, step, served = go
    prefers_pass = np.zeros(PASS + 1, np.float32)
    prefers_pass[PASS] = 100.0
    prefers_pass[:PASS] = np.linspace(0.0, 1.0, PASS)  # then the points, in a fixed order
    state = init(jax.random.key(1))
    assert bool(game.needs_reflex(state))
    plies = 0
    while not bool(state.terminated):
        mask = np.asarray(served(state))
        legal = np.asarray(state.legal_action_mask)
        assert mask.any() and not (mask & ~legal).any()
        action = int(np.argmax(np.where(mask, prefers_pass, -np.inf)))
        nxt = step(state, action)
        if action == PASS:
            # A pass either ends the game, or the mover had no sensible point left.
            assert bool(nxt.terminated) or not mask[:PASS].any(), plies
        state, plies = nxt, plies + 1
    assert plies > 60  # the raw argmax would have passed twice at once
    assert sorted(np.asarray(state.inner.rewards).tolist()) == [-1.0, 1.0]
