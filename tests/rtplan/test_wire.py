"""Typed tensors and game states survive the wire, and bad ones get specific errors."""

from __future__ import annotations

import subprocess
import sys

import jax
import numpy as np
import pytest

from rtplan import games, wire
from rtplan.v1 import tensor_pb2


@pytest.mark.parametrize(
    "array",
    [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([True, False, True]),
        np.array(7, dtype=np.int32),
        np.zeros((0, 4), np.uint32),
        np.array([-1, 2], np.int8),
    ],
)
def test_tensor_round_trip(array):
    msg = tensor_pb2.Tensor.FromString(wire.to_tensor(array).SerializeToString())
    out = wire.from_tensor(msg)
    assert out.dtype == array.dtype and out.shape == array.shape
    np.testing.assert_array_equal(out, array)


def test_tensor_errors_name_the_problem():
    t = wire.to_tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(wire.WireError, match=r"obs: shape \(2, 3\), expected \(3, 2\)"):
        wire.from_tensor(t, name="obs", shape=(3, 2))
    with pytest.raises(wire.WireError, match="obs: dtype DTYPE_FLOAT32, expected DTYPE_INT32"):
        wire.from_tensor(t, name="obs", dtype=np.int32)
    short = tensor_pb2.Tensor(dtype=t.dtype, shape=t.shape, data=t.data[:-1])
    with pytest.raises(wire.WireError, match="payload has 23 bytes"):
        wire.from_tensor(short, name="obs")
    with pytest.raises(wire.WireError, match="unknown dtype"):
        wire.from_tensor(tensor_pb2.Tensor(dtype=99, shape=[1], data=b"\0"))
    with pytest.raises(wire.WireError, match="no protocol DType"):
        wire.to_tensor(np.zeros(2, np.complex64))


@pytest.mark.parametrize("game_id", games.registered_games())
def test_state_round_trip_steps_identically(game_id):
    game = games.make(game_id)
    # Jitted: one program each, not one per operation (Pac-Man's step is hundreds).
    state = jax.jit(game.init)(jax.random.PRNGKey(3))
    wire_msg = tensor_pb2.GameState.FromString(wire.state_to_proto(game, state).SerializeToString())
    back = wire.state_from_proto(game, wire_msg)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(back), strict=True):
        np.testing.assert_array_equal(a, b)
    action = int(np.flatnonzero(np.asarray(state.legal_action_mask))[0])
    step = jax.jit(game.step)
    after = [step(s, action) for s in (state, back)]
    for a, b in zip(*(jax.tree.leaves(x) for x in after), strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_states_get_specific_errors():
    game = games.make("snake-rt-v0")
    msg = wire.state_to_proto(game, game.init(jax.random.PRNGKey(0)))
    other = games.make("tetris-rt-v0")
    with pytest.raises(wire.WireError, match="state is of game 'snake-rt-v0', expected 'tetris"):
        wire.state_from_proto(other, msg)
    missing = tensor_pb2.GameState(game_id=msg.game_id, leaves=msg.leaves[:-1])
    with pytest.raises(wire.WireError, match=r"needs \d+ leaves, got"):
        wire.state_from_proto(game, missing)
    bad = tensor_pb2.GameState()
    bad.CopyFrom(msg)
    bad.leaves[1].CopyFrom(wire.to_tensor(np.zeros((1, 1), np.float32)))
    with pytest.raises(wire.WireError, match=rf"state{msg.paths[1]}.*: dtype|shape"):
        wire.state_from_proto(game, bad)
    renamed = tensor_pb2.GameState()
    renamed.CopyFrom(msg)
    renamed.paths[0] = ".nope"
    with pytest.raises(wire.WireError, match="state leaf 0 is '.nope'"):
        wire.state_from_proto(game, renamed)


#: A custom agent in a fresh process: it joins a stub Env server (grpc and the generated stubs,
#: no game behind it), reads the frame's arrays and answers it, and never loads JAX.
_AGENT_WITHOUT_JAX = """
import queue, sys
from concurrent import futures

import grpc
import numpy as np

from rtplan import wire
from rtplan.client import EnvClient
from rtplan.v1 import env_pb2, env_pb2_grpc

received = queue.Queue()


class StubEnv(env_pb2_grpc.EnvServicer):
    def Play(self, requests, context):
        assert next(requests).HasField("join")
        yield env_pb2.ServerMessage(handshake=env_pb2.Handshake(protocol_version="rtplan.v1"))
        mask = wire.to_tensor(np.array([False, True, True]))
        obs = wire.to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        yield env_pb2.ServerMessage(
            frame=env_pb2.Frame(frame=0, legal_action_mask=mask, observation=obs)
        )
        received.put(next(requests).action)
        report = env_pb2.ActionReport(frame=0, action=2, provenance=env_pb2.PROVENANCE_ON_TIME)
        yield env_pb2.ServerMessage(
            frame=env_pb2.Frame(frame=1, legal_action_mask=mask, terminated=True, previous=report)
        )


server = grpc.server(futures.ThreadPoolExecutor(2))
env_pb2_grpc.add_EnvServicer_to_server(StubEnv(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
with EnvClient(f"127.0.0.1:{port}") as client, client.play("any-v0") as episode:
    frames = []
    for frame in episode:
        frames.append(frame)
        if not frame.done:
            episode.act(frame.frame, int(np.flatnonzero(frame.legal_action_mask)[-1]))
server.stop(None)
sent = received.get(timeout=10)
assert (sent.frame, sent.action) == (0, 2), sent
assert frames[0].legal_action_mask.tolist() == [False, True, True]
assert frames[0].observation.dtype == np.float32 and frames[0].observation.shape == (2, 3)
assert frames[1].terminated and frames[1].previous.action == 2
assert frames[1].previous.provenance == "on_time"
heavy = {("jax",), ("jaxlib",), ("flax",), ("rtplan", "games"), ("rtplan", "planner")}
loaded = sorted(m for m in sys.modules if {tuple(m.split(".")[:n]) for n in (1, 2)} & heavy)
assert not loaded, loaded
print("ok")
"""


def test_an_agent_reads_frames_and_acts_without_jax():
    """`import rtplan.client` and a frame's arrays and actions need grpcio, protobuf and numpy
    only; the game-state codec imports JAX when a state is decoded."""
    result = subprocess.run(
        [sys.executable, "-c", _AGENT_WITHOUT_JAX], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
