"""The Python client and the example agent against a real env server (gRPC on port 0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest
from fastapi.testclient import TestClient

import games
from rtplan.client import EnvClient, EnvError, decode_state
from server import Settings, create_app

ROOT = Path(__file__).resolve().parents[1]
GAME = "tetris-rt-v0"  # random play tops out within a few hundred frames


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    settings = Settings(
        http_port=0,
        grpc_port=0,
        checkpoint_dir=tmp_path_factory.mktemp("no-checkpoints"),
        record_dir=tmp_path_factory.mktemp("replays"),
        default_fps=20.0,
    )
    app = create_app(settings)
    with TestClient(app) as http, EnvClient(f"127.0.0.1:{app.state.grpc_port}") as client:
        yield SimpleNamespace(http=http, client=client, port=app.state.grpc_port)


def test_list_games(srv):
    specs = {g.game_id: g for g in srv.client.games()}
    assert set(specs) == set(games.registered_games())
    assert specs[GAME].num_actions == games.make(GAME).num_actions
    assert list(specs[GAME].observation.shape) == list(games.make(GAME).observation_shape)


def test_simulated_episode_matches_in_process_play(srv):
    """A whole episode through the client: every action on time, and the server's final state
    is what the same actions give in process."""
    rng = np.random.default_rng(0)
    actions, rewards = [], []
    with srv.client.play(GAME, seed=7, clock="simulated", send_observation=True) as ep:
        assert ep.handshake.protocol_version == "rtplan.v1"
        for frame in ep:
            if frame.frame > 0:
                assert frame.previous.frame == frame.frame - 1
                assert frame.previous.provenance == "on-time"
                assert frame.previous.action == actions[-1]
                rewards.append(frame.reward)
            assert frame.observation.shape == games.make(GAME).observation_shape
            if frame.done:
                last = frame
                break
            action = int(rng.choice(np.flatnonzero(frame.legal_action_mask)))
            actions.append(action)
            ep.act(frame.frame, action)
    assert last.terminated and last.frame == len(actions)
    assert last.episode_return == pytest.approx(sum(rewards))
    game = games.make(GAME)
    state = game.init(jax.random.PRNGKey(7))
    for a in actions:
        state = game.step(state, a)
    served = decode_state(GAME, last.state)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(served), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_actions_are_reported_and_the_game_goes_on(srv):
    with srv.client.play(GAME, seed=1, clock="simulated") as ep:
        frames = iter(ep)
        first = next(frames)
        ep.act(first.frame, 99)  # out of range: the fallback plays, reported as invalid
        second = next(frames)
        assert second.previous.provenance == "invalid" and second.previous.received_action == 99
        ep.act(first.frame, 0)  # a frame already past: an error message, no harm done
        ep.act(second.frame, 0)
        third = next(frames)
        assert third.frame == 2 and third.previous.provenance == "on-time"
    assert any("past" in message or "frame" in message for _, message in ep.errors), ep.errors


def test_unknown_game_is_a_clear_error(srv):
    with pytest.raises(EnvError, match="no-such-game"):
        srv.client.play("no-such-game")
    with pytest.raises(ValueError, match="clock must be one of"):
        srv.client.play(GAME, clock="sometimes")


def test_example_agent_plays_through_the_grpc_api(srv):
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "random_agent.py"),
            "--address",
            f"127.0.0.1:{srv.port}",
            "--game",
            GAME,
            "--fps",
            "20",
            "--max-frames",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "joined session" in out.stdout and "how the frames chose their actions" in out.stdout
