"""Losses of the planner network: masked policy cross-entropy, value loss, L2 on kernels."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rtplan.planner.network import AZNet, NetOutput, NetworkConfig, two_hot
from rtplan.planner.replay import Sample

_NEG = jnp.finfo(jnp.float32).min


def policy_loss(
    logits: jax.Array, target: jax.Array, legal: jax.Array, valid: jax.Array
) -> jax.Array:
    """Cross-entropy of the legal-masked policy against the search's improved policy.

    Args:
        logits: `[N, A]` raw policy logits.
        target: `[N, A]` improved policy (zero off `legal`).
        legal: `[N, A]` bool legal mask; illegal actions get no probability and no loss.
        valid: `[N]` bool samples that carry a policy target.

    Returns:
        `[]` mean cross-entropy over the valid samples (0 when none is valid).
    """
    logp = jax.nn.log_softmax(jnp.where(legal, logits, _NEG), axis=-1)
    ce = -jnp.sum(jnp.where(legal, target * logp, 0.0), axis=-1)
    weight = valid.astype(jnp.float32)
    return jnp.sum(ce * weight) / jnp.maximum(weight.sum(), 1.0)


def value_loss(out: NetOutput, target: jax.Array, network: NetworkConfig) -> jax.Array:
    """Categorical cross-entropy against `two_hot(target)`, or MSE for a scalar (tanh) head.

    Args:
        out: network outputs `[N]` (`value_logits` `[N, V]` for a categorical head).
        target: `[N]` value targets in return units.
        network: the network's config (`value_bins` 0: scalar head).

    Returns:
        `[]` mean loss.
    """
    if network.value_bins:
        logp = jax.nn.log_softmax(out.value_logits, axis=-1)
        return -jnp.mean(jnp.sum(two_hot(target, network) * logp, axis=-1))
    return jnp.mean((out.value - target) ** 2)


def l2_loss(params) -> jax.Array:
    """`[]` 0.5 * sum of squared kernel weights (leaves of rank >= 2; biases and norms are free)."""
    kernels = [x for x in jax.tree.leaves(params) if x.ndim >= 2]
    return 0.5 * sum(jnp.sum(x**2) for x in kernels)


def planner_loss(
    net: AZNet, params, batch: Sample, *, value_weight: float, l2: float
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The training loss of a minibatch: policy + value_weight * value + l2 * L2.

    The value is learned at the decision state (`obs`); the policy at the option's landing state
    (`landing_obs`, k > 1) where the search's prior and mask came from, else at `obs`.

    Args:
        net: the network module.
        params: its variables.
        batch: `[N]` samples.
        value_weight, l2: weights of the value and L2 terms.

    Returns:
        (`[]` loss, {policy_loss, value_loss, l2_loss}).
    """
    obs = batch.obs.astype(jnp.float32)
    if batch.landing_obs is None:
        out = out_p = net.apply(params, obs, batch.time)
    else:
        m = obs.shape[0]
        both = net.apply(
            params,
            jnp.concatenate([obs, batch.landing_obs.astype(jnp.float32)]),
            jnp.concatenate([batch.time, batch.landing_time]),
        )
        out = jax.tree.map(lambda x: x[:m], both)
        out_p = jax.tree.map(lambda x: x[m:], both)
    terms = dict(
        policy_loss=policy_loss(out_p.logits, batch.policy_target, batch.legal, batch.policy_valid),
        value_loss=value_loss(out, batch.value_target, net.config),
        l2_loss=l2_loss(params),
    )
    loss = terms["policy_loss"] + value_weight * terms["value_loss"] + l2 * terms["l2_loss"]
    return loss, terms
