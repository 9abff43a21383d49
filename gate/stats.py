"""How unsure the frozen planner is at a state: the two numbers a gate of either kind may read
(`--gate-stats`), from the planner's raw policy logits over the legal actions."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["planner_stats"]


def planner_stats(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """`[B, 2]` how unsure the frozen planner's raw policy is at `[B]` states, over their legal
    actions `legal` `[B, A]`: its entropy over log(number of legal actions) (0: one action is
    certain, 1: uniform; 0 with a single legal action), and the gap between its two largest
    legal logits, squashed as gap / (1 + gap) (0: a tie, toward 1: a clear favourite)."""
    masked = jnp.where(legal, logits, -jnp.inf)
    log_p = jax.nn.log_softmax(masked, axis=-1)
    p = jnp.exp(log_p)
    entropy = -jnp.where(legal, p * log_p, 0.0).sum(-1)
    n = legal.sum(-1)
    norm = jnp.where(n > 1, entropy / jnp.log(jnp.maximum(n, 2)), 0.0)
    top2 = jax.lax.top_k(masked, 2)[0]
    gap = jnp.where(n > 1, top2[:, 0] - top2[:, 1], 0.0)
    return jnp.stack([norm, gap / (1.0 + gap)], axis=-1)
