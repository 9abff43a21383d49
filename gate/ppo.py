"""PPO for the gate: the batch of samples, the clipped loss and the Adam update over it."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from flax import struct

from gate.clock_network import MASKED_LOGIT, ClockGateInputs, ClockGateNet, unroll
from gate.network import GateNet, apply_gate
from gate.policy import GateInputs

__all__ = [
    "Batch",
    "ClockChunks",
    "clock_ppo_loss",
    "make_clock_update",
    "make_update",
    "ppo_loss",
    "ppo_terms",
]


@struct.dataclass
class Batch:
    """Flat PPO samples `[N]`."""

    inputs: GateInputs  # [N]
    action: jax.Array  # [N] int32 index into the budgets
    log_prob: jax.Array  # [N] log-prob of `action` under the rollout's gate
    advantage: jax.Array  # [N]
    target: jax.Array  # [N] value target (scaled returns)


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


def ppo_loss(params, net: GateNet, batch: Batch, **coefs: float):
    """`ppo_terms` of the gate `net` with `params` on `batch` (coefs: clip, vf_coef, ent_coef)."""
    logits, baseline = apply_gate(net, params, batch.inputs)
    return ppo_terms(logits, baseline, batch, **coefs)


def clock_ppo_loss(params, net: ClockGateNet, batch: ClockChunks, **coefs: float):
    """`ppo_terms` of the recurrent clock gate on `[N]` chunks of `[L]` plies.

    Each chunk is replayed from its stored GRU states (`gate.clock_network.unroll`: states
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
    return _epochs(loss, optimizer, epochs=epochs, minibatches=minibatches, axis_name=axis_name)


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
    """`make_update` for the clock gate: the samples are `ClockChunks` `[N]` (whole chunks are
    permuted, so each keeps its plies in order and its stored GRU states)."""
    loss = functools.partial(clock_ppo_loss, net=net, clip=clip, vf_coef=vf_coef, ent_coef=ent_coef)
    return _epochs(loss, optimizer, epochs=epochs, minibatches=minibatches)


def _epochs(
    loss,
    optimizer: optax.GradientTransformation,
    *,
    epochs: int,
    minibatches: int,
    axis_name: str | None = None,
):
    """`epochs` passes of Adam steps of `loss(params, batch=minibatch)` over random
    permutations of the samples (leading axis) in `minibatches` slices; with `axis_name`, of
    the gradient and stats averaged over that axis (`make_update`)."""
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
