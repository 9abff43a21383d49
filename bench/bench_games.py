"""Steps per second of every game, and the cost of our wrapper over the raw library step.

Usage: python -m bench.bench_games [--batches 1 32 256 1024] [--steps 100] [--repeats 5]

Both loops run side by side in this process with the same structure: `lax.scan` over `steps`
frames of `jit(vmap(step))`, a random legal action drawn from the state's mask each frame; the
two are timed in alternation, best of `repeats`, so machine noise hits both alike.
"ratio" is our time per step divided by the raw library's (<= 1.2 is the target).
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp

from rtplan import games


def _pick(key: jax.Array, mask: jax.Array) -> jax.Array:
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def ours(game_id: str):
    """(init, step, mask) for our game."""
    game = games.make(game_id)
    # One tick per move: a clock game charges it, a committed-action game ignores it.
    return game.init, functools.partial(game.step, cost=1), lambda s: s.legal_action_mask


def raw(game_id: str):
    """(init, step, mask) for the library game ours wraps, or None (Tetris is ours alone)."""
    if game_id in ("pacman-rt-v0", "snake-rt-v0"):
        import jumanji

        env = jumanji.make("PacMan-v1" if game_id.startswith("pacman") else "Snake-v1")

        def init(key):
            return env.reset(key)

        def step(carry, action):
            return env.step(carry[0], action)

        return init, step, lambda c: c[1].observation.action_mask
    if game_id in ("speed-hex-v0", "speed-go-v0"):
        import pgx

        env = pgx.make("hex" if game_id == "speed-hex-v0" else "go_9x9")
        return env.init, env.step, lambda s: s.legal_action_mask
    return None


def _compile(fns, batch: int, steps: int):
    init, step, mask = fns

    @jax.jit
    def run(key):
        state = jax.vmap(init)(jax.random.split(key, batch))

        def body(state, key):
            action = jax.vmap(_pick)(jax.random.split(key, batch), mask(state))
            return jax.vmap(step)(state, action), None

        state, _ = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state

    jax.block_until_ready(run(jax.random.PRNGKey(0)))
    return run


def steps_per_second(runs: list, batch: int, steps: int, repeats: int) -> list[float]:
    """Best-of-`repeats` steps/s of each compiled run, timed in alternation to share noise."""
    best = [float("inf")] * len(runs)
    for r in range(repeats):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            jax.block_until_ready(run(jax.random.PRNGKey(r + 1)))
            best[i] = min(best[i], time.perf_counter() - start)
    return [batch * steps / b for b in best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="*", default=list(games.registered_games()))
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 32, 256, 1024])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; {args.steps} steps per call")
    print("| game | batch | ours steps/s | raw steps/s | ratio (ours/raw time) |")
    print("|---|---|---|---|---|")
    for game_id in args.games:
        raw_fns = raw(game_id)
        for batch in args.batches:
            runs = [_compile(ours(game_id), batch, args.steps)]
            if raw_fns is not None:
                runs.append(_compile(raw_fns, batch, args.steps))
            sps = steps_per_second(runs, batch, args.steps, args.repeats)
            ours_sps = sps[0]
            if raw_fns is None:
                raw_cell, ratio_cell = "n/a (ours)", "n/a"
            else:
                raw_sps = sps[1]
                raw_cell, ratio_cell = f"{raw_sps:,.0f}", f"{raw_sps / ours_sps:.2f}"
            print(f"| {game_id} | {batch} | {ours_sps:,.0f} | {raw_cell} | {ratio_cell} |")


if __name__ == "__main__":
    main()
