"""The recurrent clock gate network: one GRU step per own ply, and its unroll over a rollout."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rtplan.gate.clock.config import ClockGateConfig

__all__ = [
    "MASKED_LOGIT",
    "NO_OPTION",
    "ClockGateInputs",
    "ClockGateNet",
    "time_features",
    "unroll",
]

#: `ClockGateInputs.last` of a side that has not chosen yet in this game.
NO_OPTION = -1
#: Logit of an option the mover's clock cannot pay (finite, so 0 * log p stays 0).
MASKED_LOGIT = -1e9


@struct.dataclass
class ClockGateInputs:
    """What the clock gate sees at a decision (any leading shape L)."""

    obs: jax.Array  # [L, H, W, C] bfloat16 the planner's board planes for the mover
    features: jax.Array  # [L, F] the frozen planner's pooled trunk features
    value: jax.Array  # [L] the frozen planner's value for the mover
    time: jax.Array  # [L, 5] `time_features`
    last: jax.Array  # [L] int32 the option this side chose last in this game (NO_OPTION: none)
    prior: jax.Array  # [L, n] float32 the prior baseline's choice, one-hot (zeros: no prior)
    stats: jax.Array  # [L, 2] float32 how unsure the planner is (`gate.stats.planner_stats`)


def time_features(my_time: jax.Array, opp_time: jax.Array, initial_time: jax.Array) -> jax.Array:
    """`[..., 5]` float32 [my/T0, opp/T0, ln(1+my), ln(1+opp), ln(1+T0)] (ticks; T0 = 0 gives
    0 for the two fractions)."""
    my, opp, t0 = (jnp.asarray(x, jnp.float32) for x in (my_time, opp_time, initial_time))
    scale = jnp.maximum(t0, 1.0)
    return jnp.stack(
        [my / scale, opp / scale, jnp.log1p(my), jnp.log1p(opp), jnp.log1p(t0)], axis=-1
    )


class ClockGateNet(nn.Module):
    """One step of the clock gate for `[B]` games: encoders -> GRU -> head.

    The board planes and the planner's features go through one Dense each (small convs are
    slow on XLA:CPU; the planner's features already summarise the board), the five time
    features through a two-layer MLP; with the planner's value, a one-hot of the side's last
    option and (with `config.stats`) the planner's two uncertainty numbers they feed a GRU
    cell whose output feeds the logits over the options (policy-only, then the budgets) and a
    value; a prior baseline's one-hot choice, scaled, is added to the logits (zeros without a
    prior). The planner's inputs pass `stop_gradient`.

    Call: `(h [B, hidden], x: ClockGateInputs [B]) -> (h' [B, hidden], logits [B, n], value [B])`.
    """

    config: ClockGateConfig
    num_options: int

    @nn.compact
    def __call__(self, h: jax.Array, x: ClockGateInputs):
        cfg = self.config
        b = x.value.shape[0]
        board = nn.relu(nn.Dense(cfg.encoder)(x.obs.astype(jnp.float32).reshape(b, -1)))
        feats = nn.relu(nn.Dense(cfg.encoder)(jax.lax.stop_gradient(x.features)))
        t = nn.relu(nn.Dense(cfg.time_hidden)(x.time))
        t = nn.relu(nn.Dense(cfg.time_hidden)(t))
        last = jax.nn.one_hot(x.last, self.num_options)  # NO_OPTION: all zeros
        value = jax.lax.stop_gradient(x.value)[:, None]
        parts = [board, feats, t, last, value]
        if cfg.stats:
            parts.append(jax.lax.stop_gradient(x.stats).astype(jnp.float32))
        z = jnp.concatenate(parts, axis=-1)
        z = nn.relu(nn.Dense(cfg.hidden)(z))
        h, y = nn.GRUCell(features=cfg.hidden)(h, z)
        y = nn.relu(nn.Dense(cfg.head_hidden)(y))
        logits = nn.Dense(self.num_options)(y) + cfg.prior_scale * x.prior
        baseline = nn.Dense(1)(y)[:, 0]
        return h, logits, baseline


def unroll(
    net: ClockGateNet,
    params,
    carry: jax.Array,
    xs: ClockGateInputs,
    mover: jax.Array,
    start: jax.Array,
    decides: jax.Array,
):
    """Replays the gate over `[L, B]` plies of `B` games, one hidden state per side.

    At ply t of game b the side `mover[t, b]` (a player id) steps its own state; the other
    side's is untouched, so each side's state sees its own plies only. Where `start[t, b]` (the
    first ply of an episode) both sides' states are zeroed first, also inside a chunk. A ply
    where `decides[t, b]` is False (a move of a player that is not this gate) updates nothing.

    Args:
        net: the network.
        params: its variables.
        carry: `[B, 2, hidden]` the states at the first ply, indexed by player id.
        xs: `[L, B]` inputs.
        mover: `[L, B]` int32 player id to move.
        start: `[L, B]` bool, the ply starts an episode.
        decides: `[L, B]` bool, the mover is the gate.

    Returns:
        (`[B, 2, hidden]` the states after the last ply, `[L, B, n]` logits, `[L, B]` values).
    """

    def body(carry, step):
        x, p, s, d = step
        carry = jnp.where(s[:, None, None], 0.0, carry)
        h = jnp.take_along_axis(carry, p[:, None, None], 1)[:, 0]
        h_new, logits, value = net.apply(params, h, x)
        own = (jnp.arange(2)[None, :] == p[:, None]) & d[:, None]  # [B, 2]
        carry = jnp.where(own[..., None], h_new[:, None, :], carry)
        return carry, (logits, value)

    carry, (logits, values) = jax.lax.scan(body, carry, (xs, mover, start, decides))
    return carry, logits, values
