"""PPO for the gate: the batch of samples, the clipped loss and the Adam update over it."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from flax import struct

from gate.network import GateNet
from gate.policy import GateInputs

__all__ = ["Batch", "make_update", "ppo_loss", "ppo_terms"]


@struct.dataclass
class Batch:
    """Flat PPO samples `[N]`."""

    inputs: GateInputs  # [N]
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
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The PPO loss of a minibatch from the gate's outputs.

    loss = -mean(min(rho A, clip(rho, 1-eps, 1+eps) A)) + vf_coef * 0.5 mean((V - target)^2)
    - ent_coef * mean(entropy), with rho = exp(log pi(a) - old log pi(a)) and A normalised over
    the minibatch.

    Args:
        logits: `[N, K]` gate logits.
        baseline: `[N]` gate value.
        batch: the minibatch (`action`, `log_prob`, `advantage`, `target` used).
        clip: ratio clip epsilon.
        vf_coef: value loss weight.
        ent_coef: entropy bonus weight.

    Returns:
        (scalar loss, dict of policy_loss, value_loss, entropy, approx_kl, clip_frac).
    """
    log_p = jax.nn.log_softmax(logits)
    new_log_prob = jnp.take_along_axis(log_p, batch.action[:, None], axis=-1)[:, 0]
    log_ratio = new_log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    adv = batch.advantage
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    policy_loss = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
    value_loss = 0.5 * jnp.square(baseline - batch.target).mean()
    entropy = -(jnp.exp(log_p) * log_p).sum(-1).mean()
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    aux = dict(
        policy_loss=policy_loss,
        value_loss=value_loss,
        entropy=entropy,
        # The low-variance estimator E[(rho - 1) - log rho] of KL(old || new).
        approx_kl=((ratio - 1) - log_ratio).mean(),
        clip_frac=(jnp.abs(ratio - 1) > clip).mean(),
    )
    return loss, aux


def ppo_loss(params, net: GateNet, batch: Batch, **coefs: float):
    """`ppo_terms` of the gate `net` with `params` on `batch` (coefs: clip, vf_coef, ent_coef)."""
    x = batch.inputs
    logits, baseline = net.apply(params, x.obs.astype(jnp.float32), x.time, x.features, x.value)
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
):
    """`update(params, opt_state, batch, key) -> (params, opt_state, mean stats)`: `epochs`
    passes over a random permutation of `batch` `[N]` in `minibatches` slices."""
    loss = functools.partial(ppo_loss, net=net, clip=clip, vf_coef=vf_coef, ent_coef=ent_coef)
    grad_fn = jax.value_and_grad(lambda p, b: loss(p, batch=b), has_aux=True)

    def update(params, opt_state, batch: Batch, key: jax.Array):
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
