"""PPO of the committed games' gate: its loss and update over `GateNet` (`gate.ppo`'s terms)."""

from __future__ import annotations

import functools

import optax

from rtplan.gate.committed.network import GateNet, apply_gate
from rtplan.gate.ppo import Batch, make_epochs, ppo_terms

__all__ = ["make_update", "ppo_loss"]


def ppo_loss(params, net: GateNet, batch: Batch, **coefs: float):
    """`ppo_terms` of the gate `net` with `params` on `batch` (coefs: clip, vf_coef, ent_coef)."""
    logits, baseline = apply_gate(net, params, batch.inputs)
    return ppo_terms(logits, baseline, batch, **coefs)


def make_update(
    net: GateNet,
    optimizer: optax.GradientTransformation,
    *,
    epochs: int,
    minibatches: int,
    clip: float,
    vf_coef: float,
    ent_coef: float,
    axis_name: str | None = None,
):
    """`update(params, opt_state, batch, key) -> (params, opt_state, mean stats)`: `epochs`
    passes over a random permutation of `batch` `[N]` in `minibatches` slices.

    With `axis_name` (data parallel, inside `jax.shard_map` or a named `vmap`) `batch` and `key`
    are one device's: it permutes and slices its own samples, and each Adam step applies the
    gradient averaged over the axis (`pmean`), so replicated params stay equal on every device;
    the stats are averaged too. Advantages are normalised over each device's minibatch."""
    loss = functools.partial(ppo_loss, net=net, clip=clip, vf_coef=vf_coef, ent_coef=ent_coef)
    return make_epochs(loss, optimizer, epochs=epochs, minibatches=minibatches, axis_name=axis_name)
