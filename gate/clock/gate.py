"""The clock gate over a frozen planner: its inputs, masked decision, player and checkpoint.

Hidden-state semantics. The gate keeps one GRU state per game *for its own side*: zeroed when
the game starts (`ClockPlayer.init`, and at every episode start of a training rollout) and
stepped only on the plies where the gate moves. The opponent's moves never touch it; the gate
sees the opponent only through the board and the opponent's clock in its inputs. So the gate
chooses the same against any opponent that leads to the same boards and clocks (a heuristic,
another engine, a human), and in self-play each side is a separate gate with its own state
(`ClockGate.step` is called with that side's state; training keeps them by player id).

Options: 0 is policy-only (cost 0), i >= 1 the budget `budgets[i - 1]` (`ClockOptions`).
Options the mover's clock cannot pay are masked (`affordable`), so an empty clock leaves
policy-only alone (in reflex mode the game plays it at cost 0 anyway).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from rtplan import games
from rtplan.gate.clock.config import ClockGateConfig
from rtplan.gate.clock.heuristics import (
    BAR_RULES,
    BAR_UNCERTAINTY,
    ClockOptions,
    affordable,
    baselines,
    clock_inputs,
)
from rtplan.gate.clock.network import (
    MASKED_LOGIT,
    NO_OPTION,
    ClockGateInputs,
    ClockGateNet,
    time_features,
)
from rtplan.gate.files import check_gate_file
from rtplan.gate.stats import planner_stats
from rtplan.harness import checkpoint as ckpt
from rtplan.planner.configs import config_to_dict
from rtplan.planner.matches import ClockPlayer
from rtplan.planner.network import NetOutput
from rtplan.planner.options import Planner

__all__ = [
    "CLOCK_GATE_KIND",
    "ClockGate",
    "ClockGateCarry",
    "ClockGateDecision",
    "clock_gate_player",
    "clock_player",
    "load_clock_gate",
]

#: Metadata "kind" of a clock gate's exported params.
CLOCK_GATE_KIND = "clock-gate"


@struct.dataclass
class ClockGateCarry:
    """The gate's memory of `[B]` games, for its own side."""

    h: jax.Array  # [B, hidden] GRU state
    last: jax.Array  # [B] int32 its last option in this game (NO_OPTION: none yet)


@struct.dataclass
class ClockGateDecision:
    """The deployed (greedy) gate's choice at `[B]` states, one own ply each."""

    option: jax.Array  # [B] int32 0 policy-only, i >= 1 the budget `budgets[i - 1]`
    probabilities: jax.Array  # [B, n] float32 softmax of the masked logits over the options
    value: jax.Array  # [B] the frozen planner's value at the state (for the mover)
    gate_value: jax.Array  # [B] the gate's own value
    carry: ClockGateCarry  # [B] the state after this ply (`last` = `option`)


#: Baselines that are not a prior: they read the planner's outputs or draw at random (a prior
#: is a function of the clocks alone, the same in training, evaluation and the services).
NOT_A_PRIOR = ("uncertainty", "random", BAR_UNCERTAINTY)


class ClockGate:
    """The recurrent gate of a clock game over a frozen `Planner`. Pure methods."""

    def __init__(self, planner: Planner, config: ClockGateConfig) -> None:
        if planner.kind is not games.Kind.CLOCK:
            raise ValueError(f"{planner.config.game_id} is not a clock game")
        self.planner = planner
        self.config = config
        self.options = ClockOptions.of(planner)
        self.num_options = len(self.options.budgets) + 1
        self.net = ClockGateNet(config, self.num_options)
        self._prior = None
        if config.prior in BAR_RULES and not config.bar:
            raise ValueError(
                f"clock gate prior {config.prior!r} needs the clock-aware bar's table "
                "(train-gate --bar results/<game>/clock-eval/fixed-per-t0.json)"
            )
        if config.prior != "none":
            every = baselines(self.options, bar=dict(config.bar))
            if config.prior not in every or config.prior in NOT_A_PRIOR:
                raise ValueError(
                    f"clock gate prior {config.prior!r}: not a baseline that reads only the "
                    f"clocks ({sorted(set(every) - set(NOT_A_PRIOR))}) or none"
                )
            self._prior = every[config.prior]

    def inputs(self, states: games.State, out: NetOutput, last: jax.Array) -> ClockGateInputs:
        """The gate's inputs at `[B]` states with the planner's output `out` at them."""
        obs, _ = jax.vmap(self.planner.inputs)(states)
        c = clock_inputs(states)
        b = c.my_time.shape[0]
        if self._prior is None:
            prior = jnp.zeros((b, self.num_options), jnp.float32)
        else:  # a clock-only baseline: no keys, no planner outputs
            keys = jnp.zeros((b, 2), jnp.uint32)
            prior = jax.nn.one_hot(self._prior(c, keys), self.num_options, dtype=jnp.float32)
        return ClockGateInputs(
            obs=obs.astype(jnp.bfloat16),
            features=out.features,
            value=out.value,
            time=time_features(c.my_time, c.opp_time, c.initial_time),
            last=last.astype(jnp.int32),
            prior=prior,
            stats=planner_stats(out.logits, states.legal_action_mask).astype(jnp.float32),
        )

    def mask(self, states: games.State) -> jax.Array:
        """`[B, n]` bool: the options the mover's clock can pay (policy-only always)."""
        return affordable(self.options, clock_inputs(states).my_time)

    def zero_carry(self, batch: int) -> ClockGateCarry:
        return ClockGateCarry(
            h=jnp.zeros((batch, self.config.hidden), jnp.float32),
            last=jnp.full((batch,), NO_OPTION, jnp.int32),
        )

    def apply(self, params, h: jax.Array, x: ClockGateInputs, mask: jax.Array):
        """(`[B, hidden]` next state, `[B, n]` masked logits, `[B]` value)."""
        h, logits, value = self.net.apply(params, h, x)
        return h, jnp.where(mask, logits, MASKED_LOGIT), value

    def step(self, params, carry: ClockGateCarry, states: games.State, out: NetOutput):
        """One own ply of `[B]` games: (next carry without `last` updated, inputs, masked
        logits, value, mask). The caller picks the option and sets `last`."""
        x = self.inputs(states, out, carry.last)
        mask = self.mask(states)
        h, logits, value = self.apply(params, carry.h, x, mask)
        return carry.replace(h=h), x, logits, value, mask

    def decide(self, params, planner_params, carry: ClockGateCarry, states: games.State):
        """The deployed gate's own ply at `[B]` states: the planner's output there, one GRU step
        from `carry`, the argmax of the masked logits (`clock_gate_player` with `greedy`).

        Returns:
            `ClockGateDecision`, its carry the state to pass at this side's next ply.
        """
        out = self.planner.evaluate(planner_params, states)
        carry, _, logits, gate_value, _ = self.step(params, carry, states, out)
        option = jnp.argmax(logits, -1).astype(jnp.int32)
        return ClockGateDecision(
            option=option,
            probabilities=jax.nn.softmax(logits, -1).astype(jnp.float32),
            value=out.value,
            gate_value=gate_value,
            carry=carry.replace(last=option),
        )

    def init_params(self, key: jax.Array):
        """Fresh gate variables."""
        planner_params = jax.eval_shape(self.planner.init_params, key)
        states = jax.eval_shape(lambda k: jax.vmap(self.planner.game.init)(k[None]), key)
        out = jax.eval_shape(self.planner.evaluate, planner_params, states)
        x = jax.eval_shape(lambda s, o: self.inputs(s, o, jnp.zeros((1,), jnp.int32)), states, out)
        x = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), x)
        h = jnp.zeros((1, self.config.hidden), jnp.float32)
        return jax.jit(self.net.init)(key, h, x)

    def metadata(self) -> dict:
        """What `load_clock_gate` checks: the network shape and the planner it gates."""
        return {
            "game": self.planner.config.game_id,
            "budgets": list(self.options.budgets),
            "simulations": list(self.options.simulations),
            "clock_gate_config": dataclasses.asdict(self.config),
            "planner_config": config_to_dict(self.planner.config),
        }


def clock_gate_player(
    gate: ClockGate, params, *, greedy: bool = True, name: str = "gate"
) -> ClockPlayer:
    """The gate as a `ClockPlayer`: argmax of its masked logits (`greedy`, deployed), else a
    sample from them with the per-game keys. Jit `choose` at the call site."""

    def choose(carry: ClockGateCarry, states, out, keys):
        carry, _, logits, _, _ = gate.step(params, carry, states, out)
        if greedy:
            option = jnp.argmax(logits, -1)
        else:
            option = jax.vmap(jax.random.categorical)(keys, logits)
        option = option.astype(jnp.int32)
        return carry.replace(last=option), option

    return ClockPlayer(name=name, init=gate.zero_carry, choose=choose)


def load_clock_gate(path, planner: Planner, *, planner_file=None):
    """(`ClockGate`, params, metadata) from a clock gate checkpoint over `planner`.

    Raises:
        harness.checkpoint.CheckpointError: not a clock gate, another game or budgets, another
            planner shape, or (with `planner_file`) another planner's weights.
    """
    meta = check_gate_file(
        path, planner, kind=CLOCK_GATE_KIND, what="a clock gate", planner_file=planner_file
    )
    try:
        gate = ClockGate(planner, ClockGateConfig(**meta["clock_gate_config"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ckpt.CheckpointError(f"{path}: bad clock_gate_config: {err}") from err
    template = {"params": jax.eval_shape(gate.init_params, jax.random.PRNGKey(0))}
    tree, meta = ckpt.load(path, template)
    return gate, tree["params"], dict(meta, checkpoint=str(path))


def clock_player(path, planner: Planner, planner_params=None, *, planner_file=None) -> ClockPlayer:
    """The deployed clock gate at `path` over `planner` as a greedy `ClockPlayer` named "gate"
    (`load_clock_gate`; `planner_params` are the caller's, the gate reads the planner's outputs
    that `play_match` passes it)."""
    gate, params, _ = load_clock_gate(path, planner, planner_file=planner_file)
    return clock_gate_player(gate, params)
