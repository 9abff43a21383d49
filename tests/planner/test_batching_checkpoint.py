"""Mixed-budget batches equal one-by-one options; checkpoints are safe and fail clearly."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.harness import checkpoint as ckpt
from rtplan.planner import CheckpointError, Planner, PlannerConfig
from rtplan.planner.batching import OptionRunner, bucket_ladder
from rtplan.planner.network import NetworkConfig

#: An MLP torso: a conv net's search compiles several times slower on XLA:CPU, and the batching
#: does not depend on the torso.
TINY = NetworkConfig(
    torso="mlp", channels=4, blocks=1, features=8, value_hidden=8, value_bins=11,
    value_max=20.0, time_input=True,
)  # fmt: skip


def _planner():
    cfg = PlannerConfig(
        game_id="snake-rt-v0",
        network=TINY,
        simulations=(2, 4, 6, 8),
        gumbel_scale=1.0,
        game_params=(("num_rows", 6), ("num_cols", 6)),
    )
    return Planner(cfg)


def test_bucket_ladder_bounds_padding():
    ladder = bucket_ladder(1024)
    assert ladder[0] == 1 and ladder[-1] >= 1024
    for small, big in zip(ladder, ladder[1:]):
        assert big > small and big <= max(small + 1, small * 1.25)


def test_mixed_k_batch_equals_one_by_one():
    planner = _planner()
    params = planner.init_params(jax.random.PRNGKey(0))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 5))
    keys = jax.random.split(jax.random.PRNGKey(2), 5)
    ks = np.array([2, 1, 2, 1, 1])  # two budgets keep the compiles few
    runner = OptionRunner(planner, max_batch=8)
    mixed = runner(params, keys, states, ks)
    assert mixed.actions.shape == (5, 4)  # padded to the largest budget
    # The same call from host params and committed states (an evaluation's and a rollout's
    # inputs) runs the programs already compiled: one per k, whatever the inputs' placement.
    again = runner(jax.device_get(params), keys, jax.device_put(states, jax.devices()[0]), ks)
    np.testing.assert_array_equal(again.actions, mixed.actions)
    assert [runner._group[k]._cache_size() for k in (1, 2)] == [1, 1]
    # One jitted option for the loop: it compiles once per k (a new jit per game recompiled).
    option = jax.jit(planner.option, static_argnums=3)
    for i, k in enumerate(ks):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], (keys, states))
        single = option(params, one[0], one[1], int(k))
        np.testing.assert_array_equal(mixed.actions[i, :k], single.actions[0])
        assert (np.asarray(mixed.actions[i, k:]) == -1).all()
        np.testing.assert_array_equal(mixed.next_state.frame[i], single.next_state.frame[0])
        # Different batch shapes compile to different float reassociations: equal to ~1e-5.
        np.testing.assert_allclose(mixed.action_weights[i], single.action_weights[0], atol=1e-4)
        np.testing.assert_allclose(mixed.reward[i], single.reward[0], atol=1e-5)
    with pytest.raises(ValueError, match=r"budgets \[7\] not in"):
        runner(params, keys, states, np.array([7, 1, 1, 1, 1]))


def test_checkpoint_round_trip_and_metadata(tmp_path):
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "b": {"c": jnp.ones(4, jnp.int32)}}
    path = tmp_path / "p.msgpack"
    ckpt.save(path, tree, {"game": "snake-rt-v0", "step": 3})
    restored, meta = ckpt.load(path, jax.tree.map(jnp.zeros_like, tree))
    np.testing.assert_array_equal(restored["w"], tree["w"])
    np.testing.assert_array_equal(restored["b"]["c"], tree["b"]["c"])
    assert meta["game"] == "snake-rt-v0" and meta["step"] == 3 and len(meta["sha256"]) == 64
    assert b"pickle" not in path.read_bytes()


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    tree = {"w": jnp.arange(6.0)}
    path = tmp_path / "p.msgpack"
    ckpt.save(path, tree, {})
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"corrupt checkpoint .*p\.msgpack"):
        ckpt.load(path, tree)
    path.write_bytes(path.read_bytes()[:-20])  # truncated, e.g. a disk filled up
    with pytest.raises(CheckpointError, match=r"corrupt checkpoint .*p\.msgpack"):
        ckpt.load(path, tree)


def test_checkpoint_structure_mismatch_is_a_clear_error(tmp_path):
    path = tmp_path / "p.msgpack"
    ckpt.save(path, {"w": jnp.zeros(3)}, {})
    with pytest.raises(CheckpointError, match=r"does not fit .*shape \(3,\), expected \(4,\)"):
        ckpt.load(path, {"w": jnp.zeros(4)})
    with pytest.raises(CheckpointError, match="no checkpoint at .*missing.msgpack"):
        ckpt.load(tmp_path / "missing.msgpack", {"w": jnp.zeros(3)})
    (tmp_path / "bad.msgpack").write_bytes(b"\x93not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt checkpoint .*bad.msgpack"):
        ckpt.load(tmp_path / "bad.msgpack", {"w": jnp.zeros(3)})
    # The JSON beside the file is a readable copy of the metadata.
    assert json.loads((tmp_path / "p.msgpack.json").read_text())["bytes"] > 0
