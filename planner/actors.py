"""The running games of a training batch: auto-reset after each option, episode statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from flax import struct

from rtplan import games
from rtplan.planner.options import no_plan

if TYPE_CHECKING:
    from rtplan.planner.options import OptionOutput

__all__ = ["Actors", "advance", "start"]


@struct.dataclass
class Actors:
    """The running games of the batch `[B]` (planner self-play and gate rollouts alike)."""

    states: games.State  # [B]
    keys: jax.Array  # [B, 2] per-game PRNG keys (option search and resets)
    episode_return: jax.Array  # [B] raw return of the running episode
    episode_frames: jax.Array  # [B] frames of the running episode
    #: committed="plan" (`PlannerConfig.committed`): each game's plan, which its next option's
    #: committed frames play (`OptionOutput.plan`, `plan_len`: `[B, H]`, `[B]`); None under
    #: "reflex", whose options carry nothing from one to the next.
    plan: tuple[jax.Array, jax.Array] | None = None


def start(states: games.State, keys: jax.Array, *, plan_horizon: int | None = None) -> Actors:
    """`Actors` at the start of their episodes: `states` `[B]`, per-game `keys` `[B, 2]`;
    with a `plan_horizon` H (committed="plan": `PlannerConfig.plan_horizon`) each carries an
    empty plan (`planner.options.no_plan`), so its first option commits to the reflex."""
    n = keys.shape[0]
    return Actors(
        states=states,
        keys=keys,
        episode_return=jnp.zeros((n,), jnp.float32),
        episode_frames=jnp.zeros((n,), jnp.int32),
        plan=None if plan_horizon is None else no_plan(n, plan_horizon),
    )


def advance(
    actors: Actors, out: OptionOutput, fresh: games.State, keys: jax.Array
) -> tuple[Actors, dict[str, jax.Array]]:
    """The actors after one option each: finished games start again from `fresh`.

    Actors that carry plans (committed="plan") carry the option's new plan (`out.plan`,
    `out.plan_len`) where the game goes on, and no plan where it starts again.

    Args:
        actors: `[B]` games the option `out` ran from.
        out: the option's output `[B]` (`next_state`, `reward`, `done` used; `plan` and
            `plan_len` where the actors carry plans).
        fresh: `[B]` new games; row i replaces game i when it is done.
        keys: `[B, 2]` the games' carried keys from here on.

    Returns:
        (the actors, stats): `frames` (frames played, summed), `episodes` (finished),
        `return_sum` and `frames_sum` (the finished episodes' raw returns and lengths, summed).
    """
    frames = out.next_state.frame - actors.states.frame
    ret = actors.episode_return + out.reward
    length = actors.episode_frames + frames
    done = out.done
    stats = dict(
        frames=frames.sum(),
        episodes=done.sum(),
        return_sum=jnp.where(done, ret, 0.0).sum(),
        frames_sum=jnp.where(done, length, 0).sum(),
    )
    plan = None
    if actors.plan is not None:
        empty = no_plan(*out.plan.shape)
        plan = games.tree_where(done, empty, (out.plan, out.plan_len))
    actors = Actors(
        states=games.tree_where(done, fresh, out.next_state),
        keys=keys,
        episode_return=jnp.where(done, 0.0, ret),
        episode_frames=jnp.where(done, 0, length),
        plan=plan,
    )
    return actors, stats
