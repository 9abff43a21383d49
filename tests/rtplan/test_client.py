"""The Python client and the example agent against a real env server (gRPC on port 0)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from rtplan import games
from rtplan.client import EnvClient, EnvError, decode_state

ROOT = Path(__file__).resolve().parents[2]
GAME = "tetris-rt-v0"  # random play tops out within a few hundred frames


@pytest.fixture(scope="module")
def srv(serve):
    s = serve(default_fps=20.0)  # no checkpoints
    with EnvClient(s.address) as client:
        yield SimpleNamespace(http=s.client, client=client, port=s.port)


@pytest.fixture(scope="module")
def alone_srv(serve):
    s = serve(default_fps=20.0, batch_ticks=False)  # each session ticks alone (batched: default)
    with EnvClient(s.address) as client:
        yield SimpleNamespace(http=s.client, client=client, port=s.port)


def test_list_games(srv):
    specs = {g.game_id: g for g in srv.client.games()}
    assert set(specs) == set(games.registered_games())
    assert specs[GAME].num_actions == games.make(GAME).num_actions
    assert list(specs[GAME].observation.shape) == list(games.make(GAME).observation_shape)
    # Each game says what its fallback plays.
    assert specs[GAME].fallback == "no-op (the piece falls one row)"
    for game_id, spec in specs.items():
        assert spec.fallback == games.game_class(game_id).fallback_description


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
                assert frame.previous.provenance == "on_time"
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
        assert third.frame == 2 and third.previous.provenance == "on_time"
    invalid = "action 99 out of range [0, 6) for frame 0; the frame will play the fallback"
    past = "frame 0 already past (the current frame is 1)"  # no deadline: simulated clock
    assert [m for _, m in ep.errors] == [invalid, past]
    assert {code for code, _ in ep.errors} == {3}  # INVALID_ARGUMENT


@pytest.mark.parametrize("server", ["srv", "alone_srv"])
def test_an_agent_answering_late_sees_those_frames_reported_late(server, request):
    """A custom agent at 10 FPS answers every third frame 150 ms after it got it (50 ms or more
    past the frame's 100 ms deadline) and keeps silent otherwise: the late frames end up
    reported "late" with the action it sent, the silent ones "fallback". Alike when the session
    ticks in a group (its frame 0, too, is due a full period after it came)."""
    srv = request.getfixturevalue(server)
    period_ms, late_by_s = 100.0, 0.15
    sent, final = {}, {}
    with srv.client.play(GAME, seed=3, fps=1e3 / period_ms) as ep:
        for frame in ep:
            if frame.previous is not None:
                final.setdefault(frame.previous.frame, frame.previous)
            for report in frame.late:  # an earlier "fallback" frame whose action came late
                assert final[report.frame].provenance == "fallback", report
                final[report.frame] = report
            if frame.done or frame.frame >= 30:
                break
            if frame.frame % 3 == 0 and frame.frame < 24:
                action = int(np.flatnonzero(frame.legal_action_mask)[0])
                sent[frame.frame] = action
                threading.Timer(late_by_s, ep.act, (frame.frame, action)).start()
    assert ep.errors == []  # a late action is reported, not refused
    assert len(sent) == 8
    for n, report in final.items():
        if n in sent:
            assert report.provenance == "late" and report.received_action == sent[n], report
            # It was sent 150 ms after the frame came, which is after its publication.
            assert report.slack_ms <= period_ms - late_by_s * 1e3, report
            assert report.action != report.received_action  # the fallback (no-op) played
        else:
            assert report.provenance == "fallback" and report.received_action == -1, report
    assert set(sent) <= set(final)


def test_unknown_game_is_a_clear_error(srv):
    with pytest.raises(EnvError, match="no-such-game"):
        srv.client.play("no-such-game")
    with pytest.raises(ValueError, match="clock must be one of"):
        srv.client.play(GAME, clock="sometimes")


def test_example_agent_plays_through_the_grpc_api(srv, tmp_path):
    """The example agent ships in the package: `python -m rtplan.examples.random_agent` runs
    from any directory (tests/packaging/test_wheel.py: from an installed wheel's)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rtplan.examples.random_agent",
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
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's rtplan, as in conftest
    )
    assert out.returncode == 0, out.stderr
    assert "joined session" in out.stdout and "how the frames chose their actions" in out.stdout
