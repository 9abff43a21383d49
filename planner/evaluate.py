"""Batched in-process evaluation of planner policies (fixed budgets or budget sequences)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from games import random_opening
from planner.options import Planner

#: Opponent / player policies for the clock games besides ("option", k).
REFLEX = ("reflex", 0)
RANDOM = ("random", 0)
#: Clock-game evaluations start from up to this many random moves (see `make_match_eval`).
EVAL_OPENING_PLIES = 6


def standard_error(x) -> float:
    """Standard error of the mean of `x` `[N]` (ddof=1; 0 for fewer than two values)."""
    x = np.asarray(x, np.float64)
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """Per-episode outcomes of an evaluation."""

    returns: np.ndarray  # [E] raw return (committed) or score of player A in {0, 0.5, 1} (clock)
    frames: np.ndarray  # [E] frames (committed) or plies (clock) played
    decisions: np.ndarray  # [E] meta-decisions taken (committed) / moves by player A (clock)

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def se(self) -> float:
        """Standard error of the mean (ddof=1)."""
        return standard_error(self.returns)

    def __str__(self) -> str:
        return f"{self.mean:.2f} +- {self.se:.2f} (n={len(self.returns)})"


def make_committed_eval(planner: Planner, k: int, *, episodes: int, max_decisions: int):
    """Builds `run(params, key) -> (returns, frames, decisions)` for always-k play (jit it).

    Each episode starts from its own init key; all episodes run in one batch until every one is
    done or `max_decisions` options were taken.
    """
    game = planner.game

    def run(params, key):
        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, episodes))
        zeros = jnp.zeros((episodes,), jnp.float32)
        count = jnp.zeros((episodes,), jnp.int32)

        def cond(carry):
            states, _, _, i, _ = carry
            return (i < max_decisions) & ~jnp.all(states.done)

        def body(carry):
            states, ret, dec, i, key = carry
            key, sub = jax.random.split(key)
            out = planner.option(params, jax.random.split(sub, episodes), states, k)
            running = ~states.done
            ret = ret + jnp.where(running, out.reward, 0.0)
            dec = dec + running
            return out.next_state, ret, dec, i + 1, key

        states, ret, dec, _, _ = jax.lax.while_loop(
            cond, body, (states, zeros, count, jnp.int32(0), play_key)
        )
        return ret, states.frame, dec

    return run


def make_match_eval(
    planner: Planner,
    policy_a,
    policy_b,
    *,
    episodes: int,
    max_plies: int = 400,
    opening_plies: int = 0,
):
    """Builds `run(params_a, params_b, key) -> (score_a, plies, moves_a)` for a clock game.

    Policies are ("option", k), `REFLEX` (masked argmax of the raw policy, costs 0) or `RANDOM`
    (uniform legal move, costs 0). Each game starts from an even number of uniformly random
    moves in [0, `opening_plies`] (deterministic players would otherwise replay one game per
    colour); each opening is played twice, once with player A moving first (first half of the
    episodes) and once second (other half). Within a half every game has the same player to
    move at each ply, so only that player's policy is computed (`lax.cond`), not both.
    """
    game = planner.game
    if episodes % 2:
        raise ValueError(f"episodes must be even (half with each colour), got {episodes}")
    half = episodes // 2

    def act(policy, params, key, states):
        kind, k = policy
        if kind == "option":
            out = planner.option(params, jax.random.split(key, states.frame.shape[0]), states, k)
            return out.actions[:, 0], out.cost
        if kind == "reflex":
            return planner.reflex_action(params, states), jnp.zeros_like(states.frame)
        if kind == "random":
            logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
            keys = jax.random.split(key, states.frame.shape[0])
            a = jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)
            return a, jnp.zeros_like(states.frame)
        raise ValueError(f"unknown policy {policy!r}")

    def openings(key):
        init_key, n_key, move_key = jax.random.split(key, 3)
        states = jax.vmap(game.init)(jax.random.split(init_key, half))
        if opening_plies < 2:
            return states
        plies = 2 * jax.random.randint(n_key, (half,), 0, opening_plies // 2 + 1)
        play = functools.partial(random_opening, game, max_plies=opening_plies)
        return jax.vmap(play)(states, jax.random.split(move_key, half), plies)

    def play(params_a, params_b, states, play_key, a_first: bool):
        # Even openings: the player to move is still the one who moved first.
        # A is whoever moves first (pgx draws that player id per game), or the other one.
        a_id = states.current_player if a_first else 1 - states.current_player
        score = jnp.zeros((half,), jnp.float32)
        moves = jnp.zeros((half,), jnp.int32)

        def cond(carry):
            states, _, _, i, _ = carry
            return (i < max_plies) & ~jnp.all(states.done)

        def body(carry):
            states, score, moves, i, key = carry
            key, sub = jax.random.split(key)
            a_turn = (i % 2 == 0) == a_first
            action, cost = jax.lax.cond(
                a_turn,
                lambda: act(policy_a, params_a, sub, states),
                lambda: act(policy_b, params_b, sub, states),
            )
            running = ~states.done
            nxt = jax.vmap(game.step)(states, action, cost)
            reward_a = jnp.take_along_axis(nxt.inner.rewards, a_id[:, None], 1)[:, 0]
            score = score + jnp.where(running, reward_a, 0.0)
            moves = moves + (running & a_turn)
            return nxt, score, moves, i + 1, key

        states, score, moves, _, _ = jax.lax.while_loop(
            cond, body, (states, score, moves, jnp.int32(0), play_key)
        )
        return score, states.frame, moves

    def run(params_a, params_b, key):
        open_key, first, second = jax.random.split(key, 3)
        states = openings(open_key)
        halves = [
            play(params_a, params_b, states, first, True),
            play(params_a, params_b, states, second, False),
        ]
        score, frames, moves = (jnp.concatenate(x) for x in zip(*halves, strict=True))
        # +1 win, -1 loss, 0 draw or unfinished -> expected score in [0, 1].
        return (score + 1.0) / 2.0, frames, moves

    return run


def to_result(ret, frames, decisions) -> EvalResult:
    """Host-side `EvalResult` from the arrays an eval function returns."""
    ret, frames, decisions = jax.device_get((ret, frames, decisions))
    return EvalResult(np.asarray(ret), np.asarray(frames), np.asarray(decisions))
