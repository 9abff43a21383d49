"""`rtplan.gym.RemoteEnv` against a real env server (gRPC on port 0) and the games in process."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import warnings
from types import SimpleNamespace

import gymnasium
import jax
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rtplan import games
from rtplan.client import EnvError
from rtplan.gym import RemoteEnv, register_envs
from support import write_planner

#: The served Tetris is cut at this horizon (its checkpoint's game setting), so that an episode
#: reaches truncation in a few frames whatever is played.
TETRIS_HORIZON = 30
#: The games as the server runs them: (registered id, game settings).
SERVED = {
    "snake-rt-v0": {},
    "tetris-rt-v0": {"horizon": TETRIS_HORIZON},
    "pacman-rt-v0": {},
}
#: Random legal play ends Snake (416 frames at seed 11) and Pac-Man well before their horizons;
#: a bound keeps a test short whatever the seed.
MAX_FRAMES = 1000


@pytest.fixture(scope="module")
def srv(serve, tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    write_planner(root, "tetris-rt-v0", game_params=(("horizon", TETRIS_HORIZON),))
    return serve(checkpoint_dir=root)  # Snake and Pac-Man without a checkpoint: as registered


@functools.cache
def in_process(game_id: str) -> SimpleNamespace:
    """The game as the server runs it, with jitted init, step and observe."""
    game = games.make(game_id, **SERVED[game_id])
    return SimpleNamespace(
        game=game,
        init=jax.jit(game.init),
        step=jax.jit(game.step),
        observe=jax.jit(game.observe),
        fallback=jax.jit(game.fallback_action),
    )


def play_in_process(game_id: str, seed: int, rng: np.random.Generator):
    """Random legal play from `init(PRNGKey(seed))` to the episode's end (or `MAX_FRAMES`):
    the actions, and the states before and after each."""
    g = in_process(game_id)
    states = [g.init(jax.random.PRNGKey(seed))]
    actions = []
    while not bool(states[-1].done) and len(actions) < MAX_FRAMES:
        legal = np.flatnonzero(np.asarray(states[-1].legal_action_mask))
        actions.append(int(rng.choice(legal)))
        states.append(g.step(states[-1], actions[-1]))
    return actions, states


def assert_frame(g, state, obs, info) -> None:
    np.testing.assert_array_equal(obs, np.asarray(g.observe(state)))
    np.testing.assert_array_equal(info["action_mask"], np.asarray(state.legal_action_mask))
    assert info["frame"] == int(state.frame)


@pytest.mark.parametrize("game_id", list(SERVED))
def test_remote_steps_equal_in_process_steps(srv, game_id):
    """A fixed action sequence (random legal play, drawn in process first) through the remote
    env gives the in-process observations, masks, rewards and end flags at every frame, and
    ends where the game does."""
    seed = 11
    actions, states = play_in_process(game_id, seed, np.random.default_rng(seed))
    g = in_process(game_id)
    env = RemoteEnv(srv.address, game_id)
    try:
        assert env.observation_space.shape == g.game.observation_shape
        assert env.observation_space.dtype == np.float32
        assert env.action_space.n == g.game.num_actions
        assert env.game_spec.horizon == g.game.horizon
        obs, info = env.reset(seed=seed)
        assert_frame(g, states[0], obs, info)
        for action, state in zip(actions, states[1:], strict=True):
            obs, reward, terminated, truncated, info = env.step(action)
            assert_frame(g, state, obs, info)
            assert np.float32(reward) == np.asarray(state.reward)  # float32 on the wire
            assert (terminated, truncated) == (bool(state.terminated), bool(state.truncated))
            assert info["provenance"] == "on_time" and info["applied_action"] == action
        rewards = np.asarray([s.reward for s in states[1:]], np.float32)
        assert info["episode_return"] == pytest.approx(float(rewards.sum()), rel=1e-6)
        if game_id == "tetris-rt-v0":  # cut at its horizon, still running by its rules
            assert truncated and not terminated and len(actions) == TETRIS_HORIZON
        else:
            assert terminated and not truncated and len(actions) < MAX_FRAMES
        with pytest.raises(RuntimeError, match="call reset"):
            env.step(actions[-1])
        # A reset without a seed draws the session's from the env's seeded generator.
        first = env.reset(seed=5)[0], env.reset()[0]
        again = env.reset(seed=5)[0], env.reset()[0]
        np.testing.assert_array_equal(first[0], again[0])
        np.testing.assert_array_equal(first[1], again[1])
    finally:
        env.close()
    env.close()  # closing twice is allowed


def test_gymnasium_env_checker_passes(srv):
    """`check_env` on the registered ids (so that its spec-based checks run too).

    The checker steps with `action_space.sample()`, blind to the mask: Snake and Pac-Man can
    have illegal actions at frame 0, which the default `illegal="raise"` refuses, so they are
    checked with `illegal="fallback"`; every Tetris action is always legal. Its only warnings
    are about the observation bounds: the GameSpec gives no bounds, so the Box is unbounded.
    """
    ids = register_envs(srv.address)
    assert set(ids) == {f"rtplan/{game_id}" for game_id in SERVED}
    unbounded = {
        "A Box observation space minimum value is -infinity. This is probably too low.",
        "A Box observation space maximum value is infinity. This is probably too high.",
    }
    for game_id in SERVED:
        kwargs = {} if game_id == "tetris-rt-v0" else {"illegal": "fallback"}
        env = gymnasium.make(f"rtplan/{game_id}", **kwargs)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                check_env(env.unwrapped)
        finally:
            env.close()
        said = {re.sub(r"\x1b\[\d+m|WARN: ", "", str(w.message)) for w in caught}
        assert said == unbounded, said


def test_vector_envs_play_one_session_each(srv):
    register_envs(srv.address)
    envs = gymnasium.make_vec("rtplan/tetris-rt-v0", num_envs=2, vectorization_mode="sync")
    try:
        obs, info = envs.reset(seed=[3, 4])
        g = in_process("tetris-rt-v0")
        for i, seed in enumerate((3, 4)):
            np.testing.assert_array_equal(obs[i], g.observe(g.init(jax.random.PRNGKey(seed))))
        assert info["action_mask"].shape == (2, g.game.num_actions)
        # Each env's episode is cut at the horizon; the next step starts a new session.
        for _ in range(TETRIS_HORIZON):
            actions = np.argmax(info["action_mask"], axis=1)
            obs, reward, terminated, truncated, info = envs.step(actions)
        assert truncated.all() and not terminated.any() and (info["frame"] == TETRIS_HORIZON).all()
        obs, *_, info = envs.step(actions)  # the autoreset step: new sessions, seeds drawn
        assert (info["frame"] == 0).all()
    finally:
        envs.close()


def test_bad_actions(srv):
    g = in_process("pacman-rt-v0")
    state = g.init(jax.random.PRNGKey(2))
    legal = np.asarray(state.legal_action_mask)
    illegal = int(np.flatnonzero(~legal)[0])
    env = RemoteEnv(srv.address, "pacman-rt-v0")
    try:
        with pytest.raises(RuntimeError, match=r"call reset\(\) before step"):
            env.step(0)
        env.reset(seed=2)
        for bad in (99, -1, 1.0, "left", np.array([0])):
            with pytest.raises(ValueError, match="not in the action space Discrete"):
                env.step(bad)
        with pytest.raises(ValueError, match=f"action {illegal} .* is illegal at frame 0"):
            env.step(illegal)
        # Nothing was sent: the session still waits at frame 0 and takes a legal action.
        action = int(np.flatnonzero(legal)[0])
        obs, *_, info = env.step(np.int64(action))
        assert info["frame"] == 1 and info["provenance"] == "on_time"
        np.testing.assert_array_equal(obs, g.observe(g.step(state, action)))
    finally:
        env.close()
    # Sent anyway, an illegal action plays the game's fallback (as the protocol does).
    env = RemoteEnv(srv.address, "pacman-rt-v0", illegal="fallback")
    try:
        env.reset(seed=2)
        obs, *_, info = env.step(illegal)
        fallback = int(g.fallback(state))
        assert info["provenance"] == "invalid" and info["applied_action"] == fallback
        np.testing.assert_array_equal(obs, g.observe(g.step(state, fallback)))
    finally:
        env.close()
    with pytest.raises(ValueError, match="illegal must be one of"):
        RemoteEnv(srv.address, "pacman-rt-v0", illegal="ignore")


def test_unknown_games_and_servers_fail_at_construction(srv):
    with pytest.raises(EnvError, match="join refused: .*no-such-game"):
        RemoteEnv(srv.address, "no-such-game-v0")
    with pytest.raises(ValueError, match="speed-hex-v0 is a 2-player clock game"):
        RemoteEnv(srv.address, "speed-hex-v0")
    with pytest.raises(EnvError, match="cannot list the games of the env server at 127.0.0.1:1"):
        RemoteEnv("127.0.0.1:1", "snake-rt-v0")


def test_the_env_imports_no_jax():
    code = (
        "import sys, rtplan.gym\n"
        "heavy = {('jax',), ('jaxlib',), ('flax',), ('rtplan', 'games'), ('rtplan', 'planner')}\n"
        "loaded = [m for m in sys.modules if {tuple(m.split('.')[:n]) for n in (1, 2)} & heavy]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
