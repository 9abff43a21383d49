"""Variable-duration (SMDP) generalised advantage estimation over meta-steps of k frames."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def smdp_gae(
    reward: jax.Array,
    value: jax.Array,
    next_value: jax.Array,
    frames: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    *,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets of a time-major rollout of budgeted options.

    For meta-step t of k_t frames, with d_t = gamma^{k_t}:
    delta_t = R_t + d_t V(s_{t+k_t}) - V(s_t) and A_t = delta_t + d_t lambda A_{t+1}.

    - Termination: no bootstrap (the game has no future) and the recursion stops.
    - Truncation (the horizon): bootstrap from the value of the truncated state, but the
      recursion stops, because the next row of the rollout belongs to a new episode (auto-reset).
    - The last row bootstraps from its `next_value` (A_T = 0 past the rollout).

    Args:
        reward: `[T, B]` option reward R_t.
        value: `[T, B]` V(s_t) at the decision states.
        next_value: `[T, B]` V(s_{t+k_t}) at the state the option ended in, before any reset.
        frames: `[T, B]` k_t, frames the option took.
        terminated: `[T, B]` bool, the game ended by its rules during the option.
        truncated: `[T, B]` bool, the game hit its horizon during the option.
        gamma: discount per frame.
        lam: GAE lambda.

    Returns:
        (`[T, B]` advantages, `[T, B]` value targets = advantages + value).
    """
    discount = jnp.asarray(gamma, jnp.float32) ** frames.astype(jnp.float32)
    boot = jnp.where(terminated, 0.0, discount * next_value)
    delta = reward + boot - value
    carry_on = jnp.where(terminated | truncated, 0.0, discount * lam)

    def back(adv_next, xs):
        delta_t, carry_t = xs
        adv = delta_t + carry_t * adv_next
        return adv, adv

    _, adv = jax.lax.scan(back, jnp.zeros_like(delta[0]), (delta, carry_on), reverse=True)
    return adv, adv + value
