"""AlphaZero network: residual conv trunk, policy logits, value, and pooled trunk features."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# MuZero's invertible value transform h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x. Returns of
# 10-1200 per event would saturate a tanh head (the reference's bug); in h-space a categorical
# head over a modest support covers them with even resolution.
_EPS = 1e-3


def h_transform(x: jax.Array) -> jax.Array:
    """Squashes returns: h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + _EPS * x


def h_inverse(y: jax.Array) -> jax.Array:
    """Exact inverse of `h_transform`."""
    root = (jnp.sqrt(1.0 + 4.0 * _EPS * (jnp.abs(y) + 1.0 + _EPS)) - 1.0) / (2.0 * _EPS)
    return jnp.sign(y) * (root**2 - 1.0)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Shape of the AlphaZero network."""

    #: Trunk kind: "conv" (residual 3x3 convs, AlphaZero's) or "mlp" (residual dense layers on
    #: the flattened planes; ~20x faster than small convs on XLA:CPU at batch 64, measured).
    torso: str = "conv"
    #: Channels of every conv layer in the trunk ("conv"), or width of every layer ("mlp").
    channels: int = 32
    #: Pre-activation residual blocks (LayerNorm, ReLU, conv3x3, twice, plus the skip).
    blocks: int = 2
    #: Stride of the stem conv; 2 halves large boards (Pac-Man 31x28 -> 16x14) for CPU speed.
    stem_stride: int = 1
    #: Size of the pooled trunk features the gate consumes.
    features: int = 128
    #: Hidden units of the value head.
    value_hidden: int = 128
    #: 0: scalar tanh value in [-1, 1] (two-player games). >0: categorical value over this many
    #: bins spanning [-value_max, value_max] in h-space (single-agent returns).
    value_bins: int = 0
    #: Largest |return| the categorical support must represent.
    value_max: float = 1.0
    #: Whether the network takes the time input [t/T, 1 - t/T] (committed-action games).
    time_input: bool = False

    @property
    def support(self) -> np.ndarray:
        """`[value_bins]` support of the categorical value head, in h-space."""
        x = abs(self.value_max)
        top = np.sqrt(x + 1.0) - 1.0 + _EPS * x
        return np.linspace(-top, top, self.value_bins, dtype=np.float32)


@struct.dataclass
class NetOutput:
    """Network outputs for a batch."""

    logits: jax.Array  # [B, A] raw policy logits (not masked)
    value: jax.Array  # [B] value estimate in return units
    value_logits: jax.Array  # [B, V] categorical value logits ([B, 0] for a scalar head)
    features: jax.Array  # [B, F] pooled trunk features (the gate's input)


class AZNet(nn.Module):
    """AlphaZero network over board planes.

    Inputs: `obs` `[B, H, W, C]` float32, and when `config.time_input` a time vector
    `[B, 2]` = [t/T, 1 - t/T] embedded and added to every cell of the trunk.
    """

    config: NetworkConfig
    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array, time: jax.Array | None = None) -> NetOutput:
        cfg = self.config
        if cfg.torso not in ("conv", "mlp"):
            raise ValueError(f"unknown torso {cfg.torso!r}; use 'conv' or 'mlp'")
        batch = obs.shape[0]
        if cfg.time_input:
            t = nn.relu(nn.Dense(32, name="time_in")(time))
            t = nn.relu(nn.Dense(cfg.channels, name="time_out")(t))
        if cfg.torso == "mlp":
            x = nn.Dense(cfg.channels, name="stem")(obs.reshape(batch, -1))
            if cfg.time_input:
                x = x + t
            for i in range(cfg.blocks):
                y = nn.Dense(cfg.channels, name=f"block{i}_a")(
                    nn.relu(nn.LayerNorm(name=f"block{i}_ln_a")(x))
                )
                y = nn.Dense(cfg.channels, name=f"block{i}_b")(
                    nn.relu(nn.LayerNorm(name=f"block{i}_ln_b")(y))
                )
                x = x + y
            x = nn.relu(nn.LayerNorm(name="trunk_ln")(x))
            features = nn.relu(nn.Dense(cfg.features, name="features")(x))
            trunk = jnp.concatenate([x, features], -1)
            return self._heads(trunk, trunk, features)
        x = nn.Conv(cfg.channels, (3, 3), strides=cfg.stem_stride, name="stem")(obs)
        if cfg.time_input:
            x = x + t[:, None, None, :]
        for i in range(cfg.blocks):
            y = nn.Conv(cfg.channels, (3, 3), name=f"block{i}_a")(
                nn.relu(nn.LayerNorm(name=f"block{i}_ln_a")(x))
            )
            y = nn.Conv(cfg.channels, (3, 3), name=f"block{i}_b")(
                nn.relu(nn.LayerNorm(name=f"block{i}_ln_b")(y))
            )
            x = x + y
        x = nn.relu(nn.LayerNorm(name="trunk_ln")(x))
        features = nn.relu(nn.Dense(cfg.features, name="features")(x.mean(axis=(1, 2))))
        p = nn.relu(nn.Conv(2, (1, 1), name="policy_conv")(x)).reshape(batch, -1)
        v = nn.relu(nn.Conv(1, (1, 1), name="value_conv")(x)).reshape(batch, -1)
        return self._heads(
            jnp.concatenate([p, features], -1), jnp.concatenate([v, features], -1), features
        )

    def _heads(self, p: jax.Array, v: jax.Array, features: jax.Array) -> NetOutput:
        cfg = self.config
        batch = p.shape[0]
        logits = nn.Dense(self.num_actions, name="policy")(p)
        v = nn.relu(nn.Dense(cfg.value_hidden, name="value_hidden")(v))
        if cfg.value_bins:
            value_logits = nn.Dense(cfg.value_bins, name="value")(v)
            probs = jax.nn.softmax(value_logits, axis=-1)
            value = h_inverse(probs @ cfg.support)
        else:
            value_logits = jnp.zeros((batch, 0), jnp.float32)
            value = jnp.tanh(nn.Dense(1, name="value")(v)[:, 0])
        return NetOutput(logits=logits, value=value, value_logits=value_logits, features=features)


def two_hot(values: jax.Array, config: NetworkConfig) -> jax.Array:
    """Categorical target `[B, V]` for returns `values` `[B]` (two-hot in h-space)."""
    support = config.support
    y = jnp.clip(h_transform(values), support[0], support[-1])
    step = support[1] - support[0]
    pos = (y - support[0]) / step
    low = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, config.value_bins - 2)
    upper_weight = pos - low
    bins = jnp.arange(config.value_bins)
    return (bins == low[:, None]) * (1.0 - upper_weight)[:, None] + (bins == low[:, None] + 1) * (
        upper_weight[:, None]
    )
