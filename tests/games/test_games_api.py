"""API invariants every registered game must hold, checked over random legal play."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan import games
from rtplan.demo import random_legal_action
from rtplan.games.render import render

# Small settings so episodes end inside a short rollout: committed games are truncated early,
# clock games are played until their rules end them.
TEST_PARAMS = {
    "pacman-rt-v0": ({"horizon": 24}, 40),
    "snake-rt-v0": ({"horizon": 24}, 40),
    "tetris-rt-v0": ({"horizon": 24}, 40),
    "speed-hex-v0": ({}, 125),
    "speed-go-v0": ({}, 170),
}
BATCH = 4
CHANCE_GAMES = ("pacman-rt-v0", "snake-rt-v0", "tetris-rt-v0")


def test_every_registered_game_is_tested():
    assert set(games.registered_games()) == set(TEST_PARAMS)


#: Each registered game's kind, as `games.kind_of` answers "is this a clock game?".
KINDS = {
    "pacman-rt-v0": games.Kind.COMMITTED,
    "snake-rt-v0": games.Kind.COMMITTED,
    "tetris-rt-v0": games.Kind.COMMITTED,
    "speed-hex-v0": games.Kind.CLOCK,
    "speed-go-v0": games.Kind.CLOCK,
}


def test_one_function_answers_each_games_kind():
    from rtplan.games.clock import ClockGame

    assert {gid: games.kind_of(gid) for gid in games.registered_games()} == KINDS
    for game_id, kind in KINDS.items():
        cls = games.game_class(game_id)
        # By id, record, class or game: one answer, the class's (ClockGame is the clock kind).
        assert games.game_record(game_id).kind is kind
        assert games.kind_of(cls) is kind and games.kind_of(_game(game_id)) is kind
        assert issubclass(cls, ClockGame) == (kind is games.Kind.CLOCK)
        assert cls.num_players == kind.num_players
    assert [str(k) for k in games.Kind] == ["committed", "clock"]
    with pytest.raises(games.UnknownGameError, match="unknown game 'pong-v0'"):
        games.kind_of("pong-v0")


def test_a_games_players_must_be_its_kinds():
    with pytest.raises(TypeError, match="num_players=2 but kind 'committed' has 1"):

        class _TwoPlayers(games.Game):  # a two-player game that does not say its kind
            num_players = 2


def test_unknown_game_is_a_clear_error():
    with pytest.raises(games.UnknownGameError, match="unknown game 'pong-v0'.*tetris-rt-v0"):
        games.make("pong-v0")


@functools.cache
def _game(game_id: str) -> games.Game:
    return games.make(game_id, **TEST_PARAMS[game_id][0])


@functools.cache
def _rollout(game_id: str):
    """(states before each step, actions, states after), each with leading [T, B] axes."""
    game = _game(game_id)
    steps = TEST_PARAMS[game_id][1]

    @jax.jit
    def run(key):
        init_key, play_key = jax.random.split(key)
        state = jax.vmap(game.init)(jax.random.split(init_key, BATCH))

        def body(state, key):
            action = jax.vmap(random_legal_action)(jax.random.split(key, BATCH), state)
            nxt = jax.vmap(game.step)(state, action)
            return nxt, (state, action, nxt)

        _, traj = jax.lax.scan(body, state, jax.random.split(play_key, steps))
        return traj

    return jax.device_get(run(jax.random.PRNGKey(7)))


def _index(tree, *idx):
    return jax.tree.map(lambda x: x[idx], tree)


@pytest.fixture(params=sorted(TEST_PARAMS))
def game_id(request) -> str:
    return request.param


def test_init_shapes_and_dtypes(game_id):
    game = _game(game_id)
    state = jax.jit(game.init)(jax.random.PRNGKey(0))
    obs = jax.jit(game.observe)(state)
    assert obs.shape == game.observation_shape
    assert obs.dtype == jnp.float32
    assert state.legal_action_mask.shape == (game.num_actions,)
    assert state.legal_action_mask.dtype == jnp.bool_
    assert len(game.action_names) == game.num_actions
    for name in ("reward",):
        assert getattr(state, name).shape == () and getattr(state, name).dtype == jnp.float32
    for name in ("terminated", "truncated"):
        assert getattr(state, name).shape == () and getattr(state, name).dtype == jnp.bool_
    for name in ("frame", "current_player"):
        assert getattr(state, name).shape == () and getattr(state, name).dtype == jnp.int32
    assert float(state.reward) == 0.0 and int(state.frame) == 0 and not bool(state.done)
    assert bool(state.legal_action_mask.any())


def test_random_play_invariants(game_id):
    game = _game(game_id)
    before, action, after = _rollout(game_id)
    running = ~(before.terminated | before.truncated)  # [T, B]
    # Actions sampled by the test are legal; the mask is never empty while the game runs.
    assert before.legal_action_mask.any(-1)[running].all()
    # Frames count steps of running games only.
    np.testing.assert_array_equal(after.frame, before.frame + running)
    # Terminal states are absorbing: unchanged, zero reward (per-player rewards too).
    done = ~running
    assert (after.reward[done] == 0).all()
    frozen = before.replace(reward=before.reward * 0)
    if hasattr(before.inner, "rewards"):
        frozen = frozen.replace(inner=frozen.inner.replace(rewards=before.inner.rewards * 0))
    for leaf_before, leaf_after in zip(
        jax.tree.leaves(frozen),
        jax.tree.leaves(after),
        strict=True,
    ):
        np.testing.assert_array_equal(leaf_before[done], leaf_after[done])
    # terminated and truncated are kept apart.
    assert not (after.terminated & after.truncated).any()
    # Observations stay finite and correctly shaped.
    obs = jax.jit(jax.vmap(jax.vmap(game.observe)))(after)
    assert obs.shape[2:] == game.observation_shape
    assert np.isfinite(obs).all()
    # Something actually ended during the rollout, so the checks above were exercised.
    assert (after.terminated | after.truncated).any()


def test_truncation_at_horizon(game_id):
    game = _game(game_id)
    _, _, after = _rollout(game_id)
    if game.horizon is None:
        assert not after.truncated.any()
        return
    assert (after.frame <= game.horizon).all()
    at_horizon = (after.frame == game.horizon) & ~after.terminated
    np.testing.assert_array_equal(after.truncated, at_horizon)
    assert at_horizon.any(), "the rollout should reach the horizon"


def test_step_is_deterministic(game_id):
    game = _game(game_id)
    before, action, after = _rollout(game_id)
    step = jax.jit(game.step)
    for t in (0, 5):
        again = step(_index(before, t, 0), action[t, 0])
        chex.assert_trees_all_equal(jax.device_get(again), _index(after, t, 0))


def test_jit_and_vmap_agree_with_unbatched_step(game_id):
    game = _game(game_id)
    before, action, after = _rollout(game_id)
    t = 3
    batched = jax.jit(jax.vmap(game.step))(_index(before, t), action[t])
    chex.assert_trees_all_equal(jax.device_get(batched), _index(after, t))
    step = jax.jit(game.step)
    for b in range(BATCH):
        single = step(_index(before, t, b), action[t, b])
        chex.assert_trees_all_equal(jax.device_get(single), _index(after, t, b))


def test_step_traces_once(game_id):
    game = _game(game_id)
    before, action, _ = _rollout(game_id)
    chex.clear_trace_counter()
    step = jax.jit(chex.assert_max_traces(lambda s, a: game.step(s, a), n=1))
    for t in range(3):
        step(_index(before, t, 0), action[t, 0])
        step(_index(before, t, 1), jnp.int32(int(action[t, 1])))


def test_fallback_action_is_in_range(game_id):
    game = _game(game_id)
    before, _, _ = _rollout(game_id)
    fallback = jax.jit(jax.vmap(jax.vmap(game.fallback_action)))(before)
    assert fallback.dtype == jnp.int32
    assert ((fallback >= 0) & (fallback < game.num_actions)).all()


def test_rekey_keeps_the_position(game_id):
    game = _game(game_id)
    state = jax.jit(game.init)(jax.random.PRNGKey(3))
    rekeyed = jax.jit(game.rekey)(state, jax.random.PRNGKey(99))
    changed = [
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(rekeyed), strict=True)
    ]
    np.testing.assert_array_equal(game.observe(state), game.observe(rekeyed))
    np.testing.assert_array_equal(state.legal_action_mask, rekeyed.legal_action_mask)
    if game_id in CHANCE_GAMES:
        assert sum(changed) == 1, "exactly the key changes"
    else:
        assert not any(changed), "no chance after init: rekey is the identity"


def test_render_is_json_able(game_id):
    import json

    game = _game(game_id)
    _, _, after = _rollout(game_id)
    for t in (0, -1):
        frame = render(game, _index(after, t, 0))
        assert frame["game"] == game_id
        assert frame["frame"] == int(after.frame[t, 0])
        rows = frame["board"]
        assert len(rows) == game.observation_shape[0]
        assert all(len(r) == game.observation_shape[1] for r in rows)
        assert len(json.dumps(frame)) < 16_000


def test_the_record_holds_what_the_layers_read(game_id):
    """One record per game: its class, renderer, input, planner defaults, trigger features."""
    import json

    from rtplan.games.render import describe_view
    from rtplan.planner.configs import default_config

    record, game = games.game_record(game_id), _game(game_id)
    assert games.game_class(game_id).id == game_id
    view = describe_view(game)
    json.dumps(view)
    if record.keys is not None:  # every action the key map names gets its keys
        named = {a for a, n in enumerate(game.action_names) if n in record.keys}
        assert named and set(view["keys"].values()) == named
    else:  # a click game: every cell plays a distinct action, named by the game
        board = game.board
        cells = [a for row in board.actions for a in row]
        assert len(board.rows) == len(board.actions) and len(set(cells)) == len(cells)
        assert all(0 <= a < game.num_actions for a in cells)
        assert len(view["colour_names"]) == game.num_players
    assert default_config(game_id).game_id == game_id
    if record.features is not None:
        _, _, after = _rollout(game_id)
        feats = games.resolve(record.features)(_index(after, 0, 0))
        assert tuple(feats) == record.feature_names


def test_render_rejects_a_batch():
    game = _game("snake-rt-v0")
    _, _, after = _rollout("snake-rt-v0")
    with pytest.raises(ValueError, match="one state"):
        render(game, _index(after, 0))


def test_pacman_time_limit_is_truncation():
    """jumanji 1.1.2 honours `time_limit` (1.1.1 did not); ours reports it as truncation."""
    from jumanji.environments.routing.pac_man import PacMan as JumanjiPacMan

    limit = 7
    raw = JumanjiPacMan(time_limit=limit)
    ours = games.make("pacman-rt-v0", horizon=limit)
    key = jax.random.PRNGKey(0)
    raw_state, timestep = raw.reset(key)
    state = ours.init(key)
    raw_step, our_step = jax.jit(raw.step), jax.jit(ours.step)
    for frame in range(1, limit + 1):
        action = jnp.argmax(state.legal_action_mask)  # a legal move; ghosts are still far away
        raw_state, timestep = raw_step(raw_state, action)
        state = our_step(state, action)
        assert bool(timestep.last()) == (frame == limit)
        assert bool(state.truncated) == (frame == limit)
        assert not bool(state.terminated)
    assert int(raw_state.dead) == 0 and float(timestep.discount) == 0.0  # jumanji: termination


def test_pacman_observation_planes():
    game = games.make("pacman-rt-v0")
    state = game.init(jax.random.PRNGKey(0))
    obs = np.asarray(game.observe(state))
    env_state = state.inner.env
    assert obs[..., 1].sum() == 1
    assert obs[..., 2].sum() == 4
    assert obs[..., 3].sum() == int(env_state.pellets)
    assert obs[..., 4].sum() == 4
    # Items only on walkable cells; eaten ones (parked at a wall cell by jumanji) do not show.
    assert (obs[..., 3] <= obs[..., 0]).all() and (obs[..., 4] <= obs[..., 0]).all()


def test_snake_planes_match_jumanji():
    """Our planes equal jumanji's own observation grid along a game."""
    game = _game("snake-rt-v0")
    before, action, after = _rollout("snake-rt-v0")
    observe = jax.jit(game.observe)
    for t in (0, 10, 30):
        state = _index(after, t, 0)
        expected = game._env._state_to_observation(state.inner.env).grid
        np.testing.assert_allclose(observe(state), expected)


def test_snake_fallback_keeps_direction():
    game = games.make("snake-rt-v0")
    state = game.init(jax.random.PRNGKey(1))
    first = int(game.fallback_action(state))
    assert state.legal_action_mask[first]
    action = int(np.flatnonzero(np.asarray(state.legal_action_mask))[-1])
    state = game.step(state, action)
    assert int(game.fallback_action(state)) == action
