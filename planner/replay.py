"""Training samples of the planner and their circular replay buffer (jit-friendly, no cond)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rtplan import games
from rtplan.planner.options import Planner


@struct.dataclass
class Sample:
    """Training samples (leading axes: one per sample)."""

    # Planes are stored as bfloat16 (exact for the 0/1 and small-count planes, ~3 digits for the
    # fractional ones) to halve the buffer: Pac-Man's planes are 20 KB in float32.
    obs: jax.Array  # [N, H, W, C] bfloat16 planes of the decision state s_t (value input)
    time: jax.Array  # [N, 2] time input of s_t
    value_target: jax.Array  # [N] n-step return from s_t
    policy_target: jax.Array  # [N, A] improved policy of the search (action_weights)
    legal: jax.Array  # [N, A] bool legal mask where the searched action lands
    policy_valid: jax.Array  # [N] bool False where the game ended during the reflex frames
    landing_obs: jax.Array | None = None  # [N, H, W, C] planes of the landing state (k > 1)
    landing_time: jax.Array | None = None  # [N, 2] its time input (k > 1)


@struct.dataclass
class Replay:
    """Circular replay buffer; under `shard_map` each device holds its own slice of `data`."""

    data: Sample  # [C]
    ptr: jax.Array  # [] int32 next slot to write (the same on every device)
    size: jax.Array  # [] int32 filled slots (the same on every device)


def sample_shapes(planner: Planner, k: int) -> Sample:
    """Shape and dtype of one sample of option budget `k` (landing planes only for k > 1)."""
    a = planner.game.num_actions
    sd = jax.ShapeDtypeStruct
    obs = sd(planner.input_shape, jnp.bfloat16)
    two = sd((2,), jnp.float32)
    return Sample(
        obs=obs,
        time=two,
        value_target=sd((), jnp.float32),
        policy_target=sd((a,), jnp.float32),
        legal=sd((a,), jnp.bool_),
        policy_valid=sd((), jnp.bool_),
        landing_obs=obs if k > 1 else None,
        landing_time=two if k > 1 else None,
    )


def zeros(shapes, lead: tuple[int, ...]):
    """Zeros of the pytree of `shapes` with leading axes `lead`."""
    return jax.tree.map(lambda s: jnp.zeros((*lead, *s.shape), s.dtype), shapes)


def empty(shapes: Sample, capacity: int) -> Replay:
    """An empty buffer of `capacity` samples shaped like `shapes` (`sample_shapes`)."""
    return Replay(data=zeros(shapes, (capacity,)), ptr=jnp.int32(0), size=jnp.int32(0))


def nbytes(planner: Planner, k: int, capacity: int) -> int:
    """Bytes of a replay buffer's data."""
    leaves = jax.tree.leaves(sample_shapes(planner, k))
    return capacity * sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in leaves)


def add(replay: Replay, samples: Sample, valid: jax.Array) -> Replay:
    """Writes `samples` `[n]` at the write pointer if `valid` (a traced bool), else nothing.

    The oldest samples are overwritten once the buffer is full.
    """
    cap = replay.data.value_target.shape[0]
    n = samples.value_target.shape[0]
    idx = (replay.ptr + jnp.arange(n)) % cap

    def put(buf, x):
        # Rewrites the old rows when not valid: no lax.cond (XLA:CPU control flow is slow).
        return buf.at[idx].set(jnp.where(valid, x.astype(buf.dtype), buf[idx]))

    n = n * valid.astype(jnp.int32)
    return Replay(
        data=jax.tree.map(put, replay.data, samples),
        ptr=(replay.ptr + n) % cap,
        size=jnp.minimum(replay.size + n, cap),
    )


def augment(game: games.Game, batch: Sample, key: jax.Array) -> Sample:
    """`[N]` samples, each under a uniformly random board symmetry of `game` (`Game.symmetry`).

    The decision planes, the landing planes, the policy target and the legal mask of a sample
    move together; values and time inputs are invariant. A game without symmetries returns
    `batch` unchanged.
    """
    if game.num_symmetries == 1:
        return batch
    index = jax.random.randint(key, batch.obs.shape[:1], 0, game.num_symmetries)

    # One transform per sample: the landing planes ride along as extra channels.
    c = batch.obs.shape[-1]
    planes = batch.obs
    if batch.landing_obs is not None:
        planes = jnp.concatenate([batch.obs, batch.landing_obs], axis=-1)
    planes, policy, legal = jax.vmap(game.symmetry)(index, planes, batch.policy_target, batch.legal)
    landing = planes[..., c:] if batch.landing_obs is not None else None
    return batch.replace(
        obs=planes[..., :c], landing_obs=landing, policy_target=policy, legal=legal
    )
