"""Headless play of every game with a simple built-in policy, one summary line per frame."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from rtplan import games
from rtplan.games.render import render

#: Thinking cost (clock ticks) the built-in policy charges per move in the clock games.
DEMO_MOVE_COST = 8


def random_legal_action(key: jax.Array, state: games.State) -> jax.Array:
    """The built-in policy: a uniformly random legal action."""
    logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def frame_line(game: games.Game, action: int, frame: dict) -> str:
    """One human-readable line for a rendered frame."""
    head = f"[{game.id}] frame {frame['frame']:4d}  {game.action_names[action]:>10s}"
    head += f"  reward {frame['reward']:7.1f}"
    detail = "  ".join(f"{key} {frame[key]}" for key in games.game_record(game.id).summary)
    status = " TERMINATED" if frame["terminated"] else (" TRUNCATED" if frame["truncated"] else "")
    return f"{head}  {detail}{status}"


def play(game_id: str, *, frames: int, seed: int) -> float:
    """Plays one game for up to `frames` frames, printing a line per frame; returns the return."""
    game = games.make(game_id)
    step = jax.jit(game.step)
    policy = jax.jit(random_legal_action)
    key, init_key = jax.random.split(jax.random.PRNGKey(seed))
    state = jax.jit(game.init)(init_key)
    # A clock game is zero-sum between its two players: no total.
    committed = games.kind_of(game) is games.Kind.COMMITTED
    total = 0.0
    for _ in range(frames):
        key, act_key = jax.random.split(key)
        action = policy(act_key, state)
        state = step(state, action, DEMO_MOVE_COST)
        frame = render(game, state)
        total += frame["reward"] if committed else 0.0
        print(frame_line(game, int(action), frame), flush=True)
        if state.done:
            break
    return total


def play_all(game_ids: Sequence[str] | None, *, frames: int, seed: int) -> int:
    """Plays each game in turn; returns 0."""
    for game_id in game_ids or games.registered_games():
        start = time.perf_counter()
        total = play(game_id, frames=frames, seed=seed)
        print(f"[{game_id}] return {total:.1f} in {time.perf_counter() - start:.1f}s\n", flush=True)
    return 0


def demo_game(has_gate: Callable[[str], bool]) -> str:
    """The game the web demo plays when none is named: the best-ranked demo game (the records'
    `demo` rank) for which `has_gate(id)`, else the one whose record has `demo_without_gate`."""
    gated = [g for g in games.demo_games() if has_gate(g)]
    if gated:
        return gated[0]
    return next(g for g in games.registered_games() if games.game_record(g).demo_without_gate)


def list_games() -> int:
    """Prints each registered game's id and specs; returns 0."""
    for game_id in games.registered_games():
        game = games.make(game_id)
        print(
            f"{game_id:14s} players={game.num_players} actions={game.num_actions:3d} "
            f"observation={game.observation_shape} horizon={game.horizon}"
        )
    return 0
