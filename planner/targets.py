"""Value targets of expert iteration: per-step discounts, n-step returns, landing states."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rtplan import games


def step_discounts(
    discount: jax.Array, terminated: jax.Array, truncated: jax.Array, *, kind: games.Kind
) -> jax.Array:
    """Per-option-step discounts of the value targets.

    Args:
        discount: `[...]` the option's `discount` (gamma^k, 0 if terminated).
        terminated, truncated: `[...]` bool flags of the option.
        kind: the game's kind; clock games use -1 per ply (the next value is the opponent's).

    Returns:
        `[...]` float32: 0 where the option ended the game by its rules or by the horizon (the
        networks take t/T, so the horizon is a true end of the time-augmented task), else gamma^k
        (committed) or -1 (clock).
    """
    done = terminated | truncated
    live = jnp.full_like(discount, -1.0) if kind is games.Kind.CLOCK else discount
    return jnp.where(done, 0.0, live).astype(jnp.float32)


def nstep_targets(rewards: jax.Array, discounts: jax.Array, values: jax.Array, n: int) -> jax.Array:
    """Bootstrapped n-step returns over option steps (time-major).

    G_t = sum_{j<n} (prod_{i<j} d_{t+i}) r_{t+j} + (prod_{i<n} d_{t+i}) v_{t+n}.

    Args:
        rewards: `[T, ...]` reward of option step t (committed: discounted over its frames;
            clock: the mover's reward).
        discounts: `[T, ...]` discount after step t (`step_discounts`).
        values: `[T, ...]` bootstrap value of the decision state of step t (MCTS root value,
            from the view of the player to move there).
        n: steps before bootstrapping (static).

    Returns:
        `[T - n, ...]` targets for the steps whose windows are complete.
    """
    m = rewards.shape[0] - n
    if m < 1:
        raise ValueError(f"need more than n={n} steps, got {rewards.shape[0]}")
    g = jnp.zeros_like(rewards[:m])
    disc = jnp.ones_like(discounts[:m])
    for j in range(n):
        g = g + disc * rewards[j : j + m]
        disc = disc * discounts[j : j + m]
    return g + disc * values[n : n + m]


def landing_states(game: games.Game, states: games.State, actions: jax.Array) -> games.State:
    """States after playing `actions` `[B, J]` frame by frame from `states` `[B]`.

    With J = k-1 reflex actions of an option this is where its searched action lands (the state
    whose prior and mask the search used). Exact because a game's randomness is in its state.
    """
    for j in range(actions.shape[1]):
        states = jax.vmap(game.step)(states, actions[:, j])
    return states
