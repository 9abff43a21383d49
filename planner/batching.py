"""Mixed-budget batches: each game chose its own k; only the chosen options are computed.

A `lax.switch` under `vmap` runs every branch, so the reference computed all four options for
every game and kept one (4x the cost). Here the host groups the games by k and runs one jitted
option per group, padded up to a size from a fixed ladder so each (k, size) compiles once. The
ladder grows by at most 25% per rung, which bounds the padding waste. Because every game carries
its own PRNG key, a game's result does not depend on its group: grouped == one by one.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import games
from planner.options import OptionOutput, Planner


def bucket_ladder(max_size: int, growth: float = 1.25) -> tuple[int, ...]:
    """Sizes 1, 2, 3, ... growing by at most `growth` per rung, up to >= `max_size`."""
    sizes = [1]
    while sizes[-1] < max_size:
        sizes.append(max(sizes[-1] + 1, int(sizes[-1] * growth)))
    return tuple(sizes)


class OptionRunner:
    """Runs options for a batch in which every game has its own budget k."""

    def __init__(self, planner: Planner, *, max_batch: int = 1024, growth: float = 1.25) -> None:
        self.planner = planner
        self.ladder = bucket_ladder(max_batch, growth)
        self.max_k = max(planner.config.budgets)
        self._option = {
            k: jax.jit(functools.partial(planner.option, k=k)) for k in planner.config.budgets
        }

    def bucket(self, n: int) -> int:
        """The padded size a group of `n` games runs at."""
        for size in self.ladder:
            if size >= n:
                return size
        raise ValueError(f"group of {n} games exceeds the largest bucket {self.ladder[-1]}")

    def compile(self, params, keys: jax.Array, states: games.State, sizes=None) -> None:
        """Compiles every (k, size) ahead of time (e.g. at service start-up)."""
        one = jax.tree.map(lambda x: x[:1], (keys, states))
        for size in sizes or self.ladder:
            batch = jax.tree.map(lambda x, size=size: jnp.repeat(x, size, axis=0), one)
            for fn in self._option.values():
                jax.block_until_ready(fn(params, batch[0], batch[1]))

    def __call__(self, params, keys: jax.Array, states: games.State, ks) -> OptionOutput:
        """Runs option `ks[i]` on game i.

        Args:
            params: network parameters.
            keys: `[B]` PRNG keys, one per game.
            states: `[B]` decision states.
            ks: `[B]` host ints, each in the planner's budgets.

        Returns:
            An `OptionOutput` over the batch with `actions`/`planned` padded to the largest
            budget (`-1` / False past a game's own k).
        """
        ks = np.asarray(ks)
        unknown = set(ks.tolist()) - set(self._option)
        if unknown:
            raise ValueError(f"budgets {sorted(unknown)} not in {self.planner.config.budgets}")
        batch = ks.shape[0]
        parts, order = [], []
        for k in sorted(set(ks.tolist())):
            idx = np.flatnonzero(ks == k)
            size = self.bucket(len(idx))
            padded = np.concatenate([idx, np.full(size - len(idx), idx[0])])
            sub_keys, sub_states = jax.tree.map(lambda x, p=padded: x[p], (keys, states))
            out = self._option[k](params, sub_keys, sub_states)
            n = len(idx)
            out = jax.tree.map(lambda x, n=n: x[:n], out)
            pad = self.max_k - k
            out = out.replace(
                actions=jnp.pad(out.actions, ((0, 0), (0, pad)), constant_values=-1),
                planned=jnp.pad(out.planned, ((0, 0), (0, pad)), constant_values=False),
            )
            parts.append(out)
            order.append(idx)
        # Put the games back in their original order.
        inverse = np.empty(batch, np.int64)
        inverse[np.concatenate(order)] = np.arange(batch)
        merged = jax.tree.map(lambda *xs: jnp.concatenate(xs)[inverse], *parts)
        return merged
