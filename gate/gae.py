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


def side_gae(
    reward: jax.Array,
    value: jax.Array,
    done: jax.Array,
    mover: jax.Array,
    decides: jax.Array,
    bootstrap: jax.Array,
    *,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Per-side GAE of a two-player, ply-major rollout (the clock gate's self-play).

    Each side p of a game is its own sequence: its own decisions, in order, with its own value
    V_p (the gate's value from p's hidden state, for p). For p's decision at ply t with p's
    next decision at ply t' (same episode):
    delta_t = R_t + gamma V_p(s_t') - V_p(s_t) and A_t = delta_t + gamma lambda A_t', where
    R_t is p's reward over plies t .. t'-1 (its terminal result when the game ends there, on
    its own move or the opponent's reply). If the episode ends before t', no bootstrap and
    the recursion stops. The discount is gamma per own move.

    Why per side, not turn-based (-gamma per ply over both sides' values): each side's GRU
    state sees only its own plies, so its value is a function of its own sequence; and an
    opponent that is not this gate (a heuristic) has no value to chain through. With `decides`
    False on the opponent's plies, those plies only pass rewards on.

    Args:
        reward: `[T, B, 2]` each player's reward from ply t (by player id).
        value: `[T, B]` the mover's value V(s_t) (ignored where it does not decide).
        done: `[T, B]` bool, the episode ended at ply t (the next row of game b is a new one).
        mover: `[T, B]` int32 player id to move at ply t.
        decides: `[T, B]` bool, ply t is a decision of this gate.
        bootstrap: `[B, 2]` each side's value at its first decision after the rollout.
        gamma: discount per own move.
        lam: GAE lambda.

    Returns:
        (`[T, B]` advantages, `[T, B]` value targets = advantages + value); 0 where the gate
        does not decide.
    """
    n = value.shape[1]
    sides = jnp.arange(2)[None, :]

    def back(carry, xs):
        next_v, next_a, acc, alive = carry
        r, v, d, p, dec = xs
        # Rewards of ply t belong to each side's latest decision at or before t.
        acc = jnp.where(d[:, None], r, acc + r)
        alive = alive & ~d[:, None]
        next_a = jnp.where(d[:, None], 0.0, next_a)
        own = (sides == p[:, None]) & dec[:, None]  # [B, 2]
        pick = lambda x: jnp.take_along_axis(x, p[:, None], 1)[:, 0]  # noqa: E731
        live = pick(alive).astype(jnp.float32)
        delta = pick(acc) + gamma * live * pick(next_v) - v
        adv = delta + gamma * lam * live * pick(next_a)
        adv = jnp.where(dec, adv, 0.0)
        next_v = jnp.where(own, v[:, None], next_v)
        next_a = jnp.where(own, adv[:, None], next_a)
        acc = jnp.where(own, 0.0, acc)
        alive = alive | own
        return (next_v, next_a, acc, alive), adv

    init = (
        bootstrap.astype(jnp.float32),
        jnp.zeros((n, 2), jnp.float32),
        jnp.zeros((n, 2), jnp.float32),
        jnp.ones((n, 2), bool),
    )
    xs = (reward.astype(jnp.float32), value, done, mover, decides)
    _, adv = jax.lax.scan(back, init, xs, reverse=True)
    return adv, jnp.where(decides, adv + value, 0.0)
