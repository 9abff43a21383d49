"""The gate network: budget logits and a value baseline from the board, time and frozen planner."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rtplan.gate.committed.config import GateConfig
from rtplan.planner.network import h_transform


class _ResBlock(nn.Module):
    """Pre-activation residual block: (LayerNorm, ReLU, conv3x3) twice, plus the skip."""

    channels: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = x
        for _ in range(2):
            # LayerNorm, not BatchNorm: a deployed gate sees one state at a time.
            y = nn.Conv(self.channels, (3, 3))(nn.relu(nn.LayerNorm()(y)))
        return x + y


class GateNet(nn.Module):
    """Gate over the budgets K of a game.

    Inputs (batch B): `obs` `[B, H, W, C]` the planner's input planes, `time` `[B, 2]` =
    [t/T, 1 - t/T], `features` `[B, F]` the frozen planner's pooled trunk features at s_t and
    `value` `[B]` its value there (return units), and with `config.stats` `stats` `[B, 2]` its
    policy's uncertainty there (`gate.stats.planner_stats`), and with `config.memory`
    `memory` `[B, K + 2]` what it remembers of its episode
    (`gate.committed.policy.memory_features`). The planner inputs pass `stop_gradient`, so no
    gradient of any gate loss reaches the planner.

    Returns:
        (`[B, K]` logits over the budgets, `[B]` value baseline in units of `value_scale`).
    """

    config: GateConfig
    num_budgets: int
    #: Planner values are divided by this (its value support's edge) so the inputs are O(1).
    value_scale: float = 1.0

    @nn.compact
    def __call__(
        self,
        obs: jax.Array,
        time: jax.Array,
        features: jax.Array,
        value: jax.Array,
        stats: jax.Array | None = None,
        memory: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        if cfg.stats and stats is None:
            raise ValueError("this gate sees the planner's stats: pass `stats` [B, 2]")
        if cfg.memory and memory is None:
            raise ValueError("this gate has memory: pass `memory` [B, K + 2]")
        features = jax.lax.stop_gradient(features)
        value = jax.lax.stop_gradient(value)
        # h-space squashes Pac-Man/Tetris values in the thousands to the scale of Snake's.
        value_in = h_transform(value / self.value_scale)[:, None]
        t = nn.relu(nn.Dense(cfg.time_hidden)(time))
        t = nn.relu(nn.Dense(cfg.channels)(t))
        if cfg.kind == "paper":
            x = nn.Conv(cfg.channels, (1, 1))(obs)
            for _ in range(cfg.blocks):
                x = _ResBlock(cfg.channels)(x)
            x = nn.relu(nn.LayerNorm()(x))
            # The time embedding is added to every cell, then the board is pooled.
            board = (x + t[:, None, None, :]).mean(axis=(1, 2))
        else:
            board = nn.relu(nn.Dense(cfg.channels)(obs.reshape(obs.shape[0], -1))) + t
        fused = [board, features, value_in]
        if cfg.stats:
            fused.append(jax.lax.stop_gradient(stats))
        if cfg.memory:
            fused.append(jax.lax.stop_gradient(memory))
        fused = jnp.concatenate(fused, axis=-1)
        logits = nn.Dense(self.num_budgets)(nn.relu(nn.Dense(cfg.head_hidden)(fused)))
        baseline = nn.Dense(1)(nn.relu(nn.Dense(cfg.head_hidden)(fused)))[:, 0]
        return logits, baseline


def apply_gate(net: GateNet, params, x) -> tuple[jax.Array, jax.Array]:
    """`net` on a `gate.committed.policy.GateInputs` `x` (every input it carries, the optional ones
    included): (`[B, K]` logits, `[B]` baseline). The one place the inputs meet the network,
    so a new input reaches acting, evaluation and the PPO loss alike."""
    return net.apply(
        params, x.obs.astype(jnp.float32), x.time, x.features, x.value, x.stats, x.memory
    )
