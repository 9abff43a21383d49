"""PPO for the gates of both kinds: the batch of samples, the clipped loss and the Adam epochs
over it (each kind's loss and update: `gate.committed.ppo`, `gate.clock.ppo`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

__all__ = ["Batch", "make_epochs", "ppo_terms"]


@struct.dataclass
class Batch:
    """Flat PPO samples `[N]`."""

    inputs: Any  # [N] the gate's inputs (a pytree; None where the loss needs none)
    action: jax.Array  # [N] int32 index into the budgets
    log_prob: jax.Array  # [N] log-prob of `action` under the rollout's gate
    advantage: jax.Array  # [N]
    target: jax.Array  # [N] value target (scaled returns)


# ---- loss and update -------------------------------------------------------------------------


def ppo_terms(
    logits: jax.Array,
    baseline: jax.Array,
    batch: Batch,
    *,
    clip: float,
    vf_coef: float,
    ent_coef: float,
    policy_mask: jax.Array | None = None,
    value_mask: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The PPO loss of a minibatch from the gate's outputs.

    loss = -mean(min(rho A, clip(rho, 1-eps, 1+eps) A)) + vf_coef * 0.5 mean((V - target)^2)
    - ent_coef * mean(entropy), with rho = exp(log pi(a) - old log pi(a)) and A normalised over
    the minibatch. With masks, the policy terms (and A's normalisation) average over
    `policy_mask`, the value term over `value_mask` (the clock gate: a ply with one option left
    has no choice to learn, but its value still counts).

    Args:
        logits: `[N, K]` gate logits.
        baseline: `[N]` gate value.
        batch: the minibatch (`action`, `log_prob`, `advantage`, `target` used).
        clip: ratio clip epsilon.
        vf_coef: value loss weight.
        ent_coef: entropy bonus weight.
        policy_mask: `[N]` bool samples of the policy and entropy terms (None: all).
        value_mask: `[N]` bool samples of the value term (None: all).

    Returns:
        (scalar loss, dict of policy_loss, value_loss, entropy, approx_kl, clip_frac).
    """

    def mean(x, w):
        if w is None:
            return x.mean()
        w = w.astype(x.dtype)
        return (x * w).sum() / jnp.maximum(w.sum(), 1.0)

    log_p = jax.nn.log_softmax(logits)
    new_log_prob = jnp.take_along_axis(log_p, batch.action[:, None], axis=-1)[:, 0]
    log_ratio = new_log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    adv = batch.advantage
    if policy_mask is None:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    else:
        centred = adv - mean(adv, policy_mask)
        adv = centred / (jnp.sqrt(mean(jnp.square(centred), policy_mask)) + 1e-8)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv)
    policy_loss = -mean(surrogate, policy_mask)
    value_loss = 0.5 * mean(jnp.square(baseline - batch.target), value_mask)
    # Masked options have logits of -1e9: probability 0, and 0 * log p stays finite.
    entropy = mean(-(jnp.exp(log_p) * log_p).sum(-1), policy_mask)
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    aux = dict(
        policy_loss=policy_loss,
        value_loss=value_loss,
        entropy=entropy,
        # The low-variance estimator E[(rho - 1) - log rho] of KL(old || new).
        approx_kl=mean((ratio - 1) - log_ratio, policy_mask),
        clip_frac=mean((jnp.abs(ratio - 1) > clip).astype(jnp.float32), policy_mask),
    )
    return loss, aux


def make_epochs(
    loss,
    optimizer: optax.GradientTransformation,
    *,
    epochs: int,
    minibatches: int,
    axis_name: str | None = None,
):
    """`epochs` passes of Adam steps of `loss(params, batch=minibatch)` over random
    permutations of the samples (leading axis) in `minibatches` slices; with `axis_name`, of
    the gradient and stats averaged over that axis (`gate.committed.ppo.make_update`)."""
    grad_fn = jax.value_and_grad(lambda p, b: loss(p, batch=b), has_aux=True)
    if axis_name is not None:
        local_grad_fn = grad_fn

        def grad_fn(params, mb):
            return jax.lax.pmean(local_grad_fn(params, mb), axis_name)

    def update(params, opt_state, batch, key: jax.Array):
        n = batch.action.shape[0]
        size = n // minibatches

        def minibatch(carry, mb: Batch):
            params, opt_state = carry
            (value, aux), grads = grad_fn(params, mb)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            return (params, opt_state), dict(aux, loss=value, grad_norm=optax.tree.norm(grads))

        def epoch(carry, key):
            perm = jax.random.permutation(key, n)[: minibatches * size]
            mbs = jax.tree.map(lambda x: x[perm].reshape(minibatches, size, *x.shape[1:]), batch)
            return jax.lax.scan(minibatch, carry, mbs)

        keys = jax.random.split(key, epochs)
        (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), keys)
        return params, opt_state, jax.tree.map(jnp.mean, stats)

    return update
