"""PPO of the recurrent clock gate: its chunks of plies, loss and update (`gate.ppo`'s terms)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from flax import struct

from rtplan.gate.clock.network import MASKED_LOGIT, ClockGateInputs, ClockGateNet, unroll
from rtplan.gate.ppo import Batch, make_epochs, ppo_terms

__all__ = ["ClockChunks", "clock_ppo_loss", "make_clock_update"]


@struct.dataclass
class ClockChunks:
    """Recurrent PPO samples of the clock gate: `[N]` chunks of `[L]` consecutive plies of one
    game (both sides' plies, in order), each with the GRU states it started from."""

    inputs: ClockGateInputs  # [N, L]
    carry: jax.Array  # [N, 2, hidden] both sides' GRU states before the chunk's first ply
    mover: jax.Array  # [N, L] int32 player id to move
    start: jax.Array  # [N, L] bool the ply starts an episode (states are zeroed there)
    decides: jax.Array  # [N, L] bool the mover is the gate (self-play: always)
    mask: jax.Array  # [N, L, n] bool the options the mover's clock could pay
    action: jax.Array  # [N, L] int32 option index played
    log_prob: jax.Array  # [N, L] its log-prob under the rollout's gate
    advantage: jax.Array  # [N, L]
    target: jax.Array  # [N, L] value target


def clock_ppo_loss(params, net: ClockGateNet, batch: ClockChunks, **coefs: float):
    """`ppo_terms` of the recurrent clock gate on `[N]` chunks of `[L]` plies.

    Each chunk is replayed from its stored GRU states (`gate.clock.network.unroll`: states
    zeroed at episode starts inside the chunk, each side stepping on its own plies). Plies
    where the gate does not decide are out of every term; plies with a single affordable
    option (no choice) are out of the policy and entropy terms but in the value term.
    """

    def time_major(x):
        return jnp.swapaxes(x, 0, 1)

    xs = jax.tree.map(time_major, batch.inputs)
    _, logits, values = unroll(
        net,
        params,
        batch.carry,
        xs,
        time_major(batch.mover),
        time_major(batch.start),
        time_major(batch.decides),
    )
    mask = time_major(batch.mask)
    logits = jnp.where(mask, logits, MASKED_LOGIT)

    def flat(x):
        return time_major(x).reshape(-1)

    flat_batch = Batch(
        inputs=None,
        action=flat(batch.action),
        log_prob=flat(batch.log_prob),
        advantage=flat(batch.advantage),
        target=flat(batch.target),
    )
    decides = flat(batch.decides)
    choice = decides & (mask.sum(-1).reshape(-1) > 1)
    return ppo_terms(
        logits.reshape(-1, logits.shape[-1]),
        values.reshape(-1),
        flat_batch,
        policy_mask=choice,
        value_mask=decides,
        **coefs,
    )


def make_clock_update(
    net: ClockGateNet,
    optimizer: optax.GradientTransformation,
    *,
    epochs: int,
    minibatches: int,
    clip: float,
    vf_coef: float,
    ent_coef: float,
):
    """`gate.committed.ppo.make_update` for the clock gate: the samples are `ClockChunks` `[N]`
    (whole chunks are permuted, so each keeps its plies in order and its stored GRU states)."""
    loss = functools.partial(clock_ppo_loss, net=net, clip=clip, vf_coef=vf_coef, ent_coef=ent_coef)
    return make_epochs(loss, optimizer, epochs=epochs, minibatches=minibatches)
