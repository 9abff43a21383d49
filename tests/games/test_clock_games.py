"""Tests for the clock games (Speed Hex, Speed Go)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.games import make
from rtplan.games.go import SpeedGo
from rtplan.games.hex import SpeedHex

T0 = 300
SWAP = 121
PASS = 81


class _Jitted:
    """A game with its entry points jitted once per module."""

    def __init__(self, game):
        self.game = game
        self.init = jax.jit(game.init)
        self.step = jax.jit(game.step)
        self.needs_reflex = jax.jit(game.needs_reflex)
        self.fallback = jax.jit(game.fallback_action)
        self.observe = jax.jit(game.observe)

    def play(self, state, actions, cost=0):
        for a in actions:
            state = self.step(state, a, cost)
        return state


@pytest.fixture(scope="module")
def hex_reflex():
    return _Jitted(make("speed-hex-v0", initial_time=T0))


@pytest.fixture(scope="module")
def hex_strict():
    return _Jitted(make("speed-hex-v0", initial_time=T0, timeout="strict"))


@pytest.fixture(scope="module")
def go_reflex():
    return _Jitted(make("speed-go-v0", initial_time=T0))


@pytest.fixture(scope="module")
def keys_by_first_mover(hex_reflex):
    """{player id: a key whose game starts with that player to move} (pgx draws it)."""
    found = {}
    for seed in range(64):
        key = jax.random.key(seed)
        found.setdefault(int(hex_reflex.init(key).current_player), key)
        if len(found) == 2:
            return found
    raise AssertionError("pgx never picked both first movers")


# A Hex line where the first mover (black, top-bottom) fills column a rows 1..10 while the
# second mover fills column f; black then wins with a11 (index 110).
_BLACK_COL = [11 * r for r in range(10)]
_WHITE_COL = [11 * r + 5 for r in range(10)]
_NEAR_WIN = [a for pair in zip(_BLACK_COL, _WHITE_COL, strict=True) for a in pair]
_WINNING_MOVE = 110


def test_invalid_timeout_raises():
    with pytest.raises(ValueError, match="timeout"):
        SpeedHex(timeout="sudden-death")
    with pytest.raises(ValueError, match="timeout"):
        SpeedGo(timeout="")


def test_static_attributes():
    hx, go = make("speed-hex-v0"), make("speed-go-v0")
    assert (hx.id, hx.num_actions, hx.observation_shape) == ("speed-hex-v0", 122, (11, 11, 6))
    assert (go.id, go.num_actions, go.observation_shape) == ("speed-go-v0", 82, (9, 9, 19))
    for g in (hx, go):
        assert g.num_players == 2 and g.horizon is None
        assert len(g.action_names) == g.num_actions == len(set(g.action_names))
        assert g.initial_time == 300 and g.timeout == "reflex"
    assert hx.action_names[0] == "a1" and hx.action_names[120] == "k11"
    assert hx.action_names[SWAP] == "swap"
    assert go.action_names[PASS] == "pass" and go.komi == 7.5


def test_initial_state(hex_reflex, go_reflex):
    for jg in (hex_reflex, go_reflex):
        s = jg.init(jax.random.key(1))
        assert int(s.frame) == 0 and float(s.reward) == 0.0 and not bool(s.done)
        assert s.inner.clocks.tolist() == [T0, T0] and s.inner.clocks.dtype == jnp.int32
        assert s.legal_action_mask.any() and not bool(s.inner.timed_out)
        obs = jg.observe(s)
        assert obs.shape == jg.game.observation_shape
        assert obs.dtype == jnp.float32
        np.testing.assert_array_equal(obs[..., -2:], 1.0)


@pytest.mark.parametrize("first", [0, 1])
def test_charge_on_move_indexed_by_player_id(hex_reflex, keys_by_first_mover, first):
    s = hex_reflex.init(keys_by_first_mover[first])
    assert int(s.current_player) == first
    s = hex_reflex.step(s, 60, 7)
    assert int(s.current_player) == 1 - first
    assert int(s.inner.clocks[first]) == T0 - 7 and int(s.inner.clocks[1 - first]) == T0
    s = hex_reflex.step(s, 0, 3)
    assert int(s.inner.clocks[first]) == T0 - 7 and int(s.inner.clocks[1 - first]) == T0 - 3
    assert int(s.frame) == 2 and float(s.reward) == 0.0 and not bool(s.done)


def test_clock_planes(hex_reflex, keys_by_first_mover):
    s = hex_reflex.init(keys_by_first_mover[0])
    s = hex_reflex.step(s, 60, 30)
    # Player 1 is to move: its own clock is full, player 0 has spent 30 of 300.
    obs = hex_reflex.observe(s)
    np.testing.assert_allclose(obs[..., -2], 1.0)
    np.testing.assert_allclose(obs[..., -1], 0.9)
    np.testing.assert_allclose(hex_reflex.game.clock_features(s), [1.0, 0.9])


def test_traced_initial_time_compiles_once(hex_reflex):
    traces = []

    def init(key, t0):
        traces.append(None)
        return hex_reflex.game.set_initial_time(hex_reflex.game.init(key), t0)

    jinit = jax.jit(init)
    for t0 in (40, 80):
        s = jinit(jax.random.key(0), jnp.int32(t0))
        assert s.inner.clocks.tolist() == [t0, t0] and int(s.inner.initial_time) == t0
        s = hex_reflex.step(s, 60, 10)
        np.testing.assert_allclose(hex_reflex.observe(s)[..., -2:].mean((0, 1)), [1.0, 1 - 10 / t0])
    assert len(traces) == 1


def test_reflex_clamps_and_empty_clock_moves_free(hex_reflex, keys_by_first_mover):
    s = hex_reflex.init(keys_by_first_mover[1])
    s = hex_reflex.step(s, 60, T0 + 50)  # player 1 overspends
    assert s.inner.clocks.tolist() == [T0, 0] and not bool(s.done)
    assert not bool(hex_reflex.needs_reflex(s))  # player 0 to move, full clock
    s = hex_reflex.step(s, 0, 5)
    assert bool(hex_reflex.needs_reflex(s))  # player 1 to move, empty clock
    s = hex_reflex.step(s, 1, 40)  # a reflex move: the charge is ignored
    assert s.inner.clocks.tolist() == [T0 - 5, 0] and not bool(s.done)
    assert float(s.reward) == 0.0 and int(s.frame) == 3
    assert not bool(hex_reflex.needs_reflex(s))


def test_reflex_with_zero_initial_time(hex_reflex):
    s = hex_reflex.game.set_initial_time(hex_reflex.init(jax.random.key(0)), 0)
    assert bool(hex_reflex.needs_reflex(s))
    np.testing.assert_array_equal(hex_reflex.observe(s)[..., -2:], 0.0)
    s = hex_reflex.step(s, 60, 9)
    assert s.inner.clocks.tolist() == [0, 0] and not bool(s.done)


@pytest.mark.parametrize("overshoot", [0, 25])
def test_strict_timeout_loses_at_once(hex_strict, keys_by_first_mover, overshoot):
    s = hex_strict.init(keys_by_first_mover[0])
    s = hex_strict.step(s, 60, 10)
    s = hex_strict.step(s, 0, T0 - 1)  # player 1 keeps 1 tick: fine
    assert s.inner.clocks.tolist() == [T0 - 10, 1] and not bool(s.done)
    before = s
    s = hex_strict.step(s, 5, T0 - 10 + overshoot)  # player 0 spends exactly all, or more
    assert bool(s.terminated) and bool(s.inner.timed_out) and not bool(s.truncated)
    assert float(s.reward) == -1.0 and s.inner.rewards.tolist() == [-1.0, 1.0]
    assert s.inner.clocks.tolist() == [0, 1]
    # The flag fell before the stone was placed: the board is the position before the move.
    np.testing.assert_array_equal(s.inner.board.observation, before.inner.board.observation)
    assert int(s.frame) == 3
    # Finished states absorb with zero rewards.
    after = hex_strict.step(s, 7, 1)
    assert float(after.reward) == 0.0 and after.inner.rewards.tolist() == [0.0, 0.0]
    assert int(after.frame) == 3 and after.inner.clocks.tolist() == [0, 1]


def test_strict_timeout_overrides_board_win(hex_strict, keys_by_first_mover):
    for first, key in keys_by_first_mover.items():
        s = hex_strict.play(hex_strict.init(key), _NEAR_WIN)
        assert not bool(s.done) and int(s.current_player) == first
        # Which moves win on the board (no charge)? a11 must be one of them.
        all_moves = jax.vmap(hex_strict.step, (None, 0))(s, jnp.arange(121))
        wins = np.flatnonzero(np.asarray(all_moves.terminated & (all_moves.reward > 0)))
        assert _WINNING_MOVE in wins
        won = hex_strict.step(s, _WINNING_MOVE, 0)
        assert bool(won.terminated) and float(won.reward) == 1.0 and not bool(won.inner.timed_out)
        assert float(won.inner.rewards[first]) == 1.0
        lost = hex_strict.step(s, _WINNING_MOVE, T0)
        assert bool(lost.terminated) and bool(lost.inner.timed_out)
        assert float(lost.reward) == -1.0
        assert float(lost.inner.rewards[first]) == -1.0
        assert float(lost.inner.rewards[1 - first]) == 1.0


def test_hex_goal_edges_are_the_edges_the_rules_end_the_game_on(hex_reflex):
    """`GOAL_EDGES` (what the pages draw) against pgx's rule: a colour's 11-stone line across its
    stated edges ends the game in its favour; across the other two edges it does not."""
    from rtplan.games.hex import GOAL_EDGES

    # Cell j of line i: down column i ("rows": joins the top and bottom) or along row i.
    cell = {"rows": lambda i, j: 11 * j + i, "columns": lambda i, j: 11 * i + j}
    for colour in (0, 1):
        for edges, wins in ((GOAL_EDGES[colour], True), (GOAL_EDGES[1 - colour], False)):
            mine = [cell[edges](2, j) for j in range(11)]
            # The other colour: 10 cells of a parallel line and one cell off both lines.
            theirs = [cell[edges](8, j) for j in range(10)] + [cell[edges](5, 0)]
            plies = zip(mine, theirs) if colour == 0 else zip(theirs, mine)
            moves = [a for pair in plies for a in pair][: 21 + colour]
            s = hex_reflex.play(hex_reflex.init(jax.random.key(0)), moves)
            assert bool(s.terminated) == wins, (colour, edges)
            if wins:
                assert float(s.reward) == 1.0  # the last mover, `colour`, won


def test_needs_reflex_is_false_in_strict_mode(hex_strict):
    s = hex_strict.game.set_initial_time(hex_strict.init(jax.random.key(0)), 0)
    assert not bool(hex_strict.needs_reflex(s))
    s = hex_strict.step(s, 60, 0)  # T0 = 0: any move loses on time
    assert bool(s.inner.timed_out) and float(s.reward) == -1.0


def test_hex_swap_only_on_second_ply(hex_reflex):
    s = hex_reflex.init(jax.random.key(3))
    assert not bool(s.legal_action_mask[SWAP])
    s = hex_reflex.step(s, 2, 0)
    assert bool(s.legal_action_mask[SWAP])
    assert float(hex_reflex.observe(s)[0, 0, 3]) == 1.0  # pgx's can-swap plane
    swapped = hex_reflex.step(s, SWAP, 0)
    assert not bool(swapped.done) and not bool(swapped.legal_action_mask[SWAP])
    s = hex_reflex.step(s, 60, 0)
    assert not bool(s.legal_action_mask[SWAP])
    s = hex_reflex.step(s, 0, 0)
    assert not bool(s.legal_action_mask[SWAP])


def test_illegal_move_loses_for_mover(hex_reflex, keys_by_first_mover):
    s = hex_reflex.init(keys_by_first_mover[1])
    s = hex_reflex.step(s, 60, 0)
    s = hex_reflex.step(s, 60, 2)  # player 0 plays on an occupied cell
    assert bool(s.terminated) and float(s.reward) == -1.0
    assert s.inner.rewards.tolist() == [-1.0, 1.0] and int(s.inner.clocks[0]) == T0 - 2


def test_hex_fallback_nearest_centre(hex_reflex):
    s = hex_reflex.init(jax.random.key(0))
    assert int(hex_reflex.fallback(s)) == 60
    s = hex_reflex.step(s, 60, 0)
    # The six neighbours of the centre tie; the lowest index wins (49 = f5).
    assert int(hex_reflex.fallback(s)) == 49
    # Fallback-only play is legal every ply and ends in a win for someone.
    for _ in range(121):
        if bool(s.done):
            break
        a = hex_reflex.fallback(s)
        assert bool(s.legal_action_mask[a]) and int(a) != SWAP
        s = hex_reflex.step(s, a, 1)
    assert bool(s.terminated) and sorted(s.inner.rewards.tolist()) == [-1.0, 1.0]
    assert float(s.reward) == 1.0  # the last mover made the winning connection
    assert hex_reflex.game.rekey(s, jax.random.key(9)) is s


def test_go_two_passes_and_komi(go_reflex, keys_by_first_mover):
    for key in keys_by_first_mover.values():
        s = go_reflex.init(key)
        black = int(s.current_player)
        assert int(go_reflex.fallback(s)) == PASS and bool(s.legal_action_mask[PASS])
        s = go_reflex.step(s, PASS, 4)
        assert bool(s.legal_action_mask[PASS]) and not bool(s.done)
        white = int(s.current_player)
        assert white == 1 - black
        s = go_reflex.step(s, PASS, 6)
        # Empty board, komi 7.5: white wins.
        assert bool(s.terminated) and not bool(s.truncated)
        assert float(s.inner.rewards[white]) == 1.0 and float(s.inner.rewards[black]) == -1.0
        assert float(s.reward) == 1.0  # white made the last move
        assert int(s.inner.clocks[black]) == T0 - 4 and int(s.inner.clocks[white]) == T0 - 6


def test_go_komi_is_a_setting():
    game = SpeedGo(komi=-0.5)
    s = game.init(jax.random.key(0))
    black = int(s.current_player)
    step = jax.jit(game.step)
    s = step(step(s, PASS), PASS)
    assert bool(s.terminated) and float(s.inner.rewards[black]) == 1.0


def test_go_stones_and_observation(go_reflex):
    s = go_reflex.init(jax.random.key(0))
    s = go_reflex.step(s, 40, 2)  # E5, the centre
    obs = go_reflex.observe(s)
    assert obs.shape == (9, 9, 19) and obs.dtype == jnp.float32
    assert float(obs[4, 4, 1]) == 1.0  # opponent's stone, latest position
    assert not bool(s.legal_action_mask[40])
    np.testing.assert_allclose(obs[0, 0, -2:], [1.0, (T0 - 2) / T0])


@pytest.mark.parametrize("game_fixture", ["hex_reflex", "go_reflex"])
def test_board_symmetries_commute_with_the_rules(game_fixture, request):
    # Playing the mapped moves reaches the mapped position: planes and legal mask alike, for
    # every symmetry (this also pins that the planes' (row, col) is the action's cell).
    g = request.getfixturevalue(game_fixture)
    n = g.game.num_symmetries
    assert n == {"hex_reflex": 2, "go_reflex": 8}[game_fixture]
    sym = jax.jit(g.game.symmetry)
    eye = np.eye(g.game.num_actions, dtype=np.float32)
    rng = np.random.default_rng(0)
    start = g.init(jax.random.key(1))
    s, moves = start, []
    for _ in range(24):
        legal = np.flatnonzero(np.asarray(s.legal_action_mask))
        moves.append(int(rng.choice(legal)))
        s = g.step(s, moves[-1])
    assert not bool(s.done)
    planes = g.observe(s)
    for i in range(n):
        mapped = [int(np.argmax(sym(i, planes, eye[a])[1])) for a in moves]
        if i:
            assert mapped != moves  # not the identity
        t = g.play(start, mapped)
        want_planes, want_legal = sym(i, planes, s.legal_action_mask)
        np.testing.assert_array_equal(g.observe(t), want_planes)
        np.testing.assert_array_equal(t.legal_action_mask, want_legal)
    # Special actions map to themselves.
    special = eye[g.game.num_actions - 1]
    for i in range(n):
        np.testing.assert_array_equal(sym(i, planes, special)[1], special)


def test_coordinates_are_the_action_names():
    from rtplan.games import go
    from rtplan.games import hex as hex_game

    for a, name in enumerate(SpeedGo.action_names):
        assert go.parse_vertex(name) == a and go.parse_vertex(name.lower()) == a
    assert (go.vertex_name(0), go.vertex_name(8), go.vertex_name(80)) == ("A9", "J9", "J1")
    assert "I" not in "".join(SpeedGo.action_names)
    for a, name in enumerate(SpeedHex.action_names):
        assert hex_game.parse_cell(name) == a
    assert [hex_game.cell_name(a) for a in (0, 10, 120, 121)] == ["a1", "k1", "k11", "swap"]
    for bad in ("I5", "A10", "Z1", ""):
        with pytest.raises(ValueError):
            go.parse_vertex(bad)
    with pytest.raises(ValueError):
        hex_game.parse_cell("l1")
    assert SpeedGo.board.actions[8][0] == 72 and SpeedGo.board.rows[8] == "1"
