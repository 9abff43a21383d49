"""The committed games' gate: its inputs from a frozen planner, the budget decision, and its
checkpoint."""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
from flax import struct

from rtplan import games
from rtplan.gate.committed.config import GateConfig
from rtplan.gate.committed.network import GateNet, apply_gate
from rtplan.gate.files import check_gate_file
from rtplan.gate.stats import planner_stats
from rtplan.harness import checkpoint as ckpt
from rtplan.planner.batching import OptionRunner
from rtplan.planner.configs import config_to_dict
from rtplan.planner.network import NetOutput, h_transform
from rtplan.planner.options import Planner

__all__ = ["Gate", "GateDecision", "GateInputs", "GateMemory", "load_gate"]


@struct.dataclass
class GateInputs:
    """What the gate sees at decision states (any leading shape L)."""

    obs: jax.Array  # [L, H, W, C] bfloat16 planner input planes
    time: jax.Array  # [L, 2] [t/T, 1 - t/T]
    features: jax.Array  # [L, F] frozen planner trunk features
    value: jax.Array  # [L] frozen planner value (return units)
    #: [L, 2] the frozen planner's uncertainty (`planner_stats`); None where not computed.
    stats: jax.Array | None = None
    #: [L, K + 2] what the gate remembers (`memory_features`); None for a gate without memory.
    memory: jax.Array | None = None


#: Frames since the last switch at which `memory_features` reads 1/2.
SINCE_HALF = 16.0


@struct.dataclass
class GateMemory:
    """What a gate with `GateConfig.memory` remembers of its episode so far, `[B]` each.

    Only the gate's own decisions update it (`after`); it starts empty at every episode start
    (`empty`, or `reset` for the games that ended), so nothing crosses episodes.
    """

    last: jax.Array  # [B] int32 index of the budget chosen last; -1 before the first decision
    value: jax.Array  # [B] float32 the frozen planner's value at that decision (return units)
    since: jax.Array  # [B] int32 frames since the gate last switched budget (0 at the start)

    @classmethod
    def empty(cls, n: int) -> GateMemory:
        """The memory of `n` games at their first decision."""
        return cls(
            last=jnp.full((n,), -1, jnp.int32),
            value=jnp.zeros((n,), jnp.float32),
            since=jnp.zeros((n,), jnp.int32),
        )

    def after(self, index: jax.Array, value: jax.Array, k: jax.Array) -> GateMemory:
        """The memory once budget `index` (an option of `k` frames) is chosen at states whose
        planner value is `value`: a switch (another index than last time, or the first
        decision) restarts the count of frames since the last switch."""
        switched = index != self.last
        return GateMemory(
            last=index.astype(jnp.int32),
            value=value.astype(jnp.float32),
            since=jnp.where(switched, 0, self.since) + k.astype(jnp.int32),
        )

    def reset(self, done: jax.Array) -> GateMemory:
        """Empty where `done` `[B]` (a new episode starts there), kept elsewhere."""
        return jax.tree.map(
            lambda e, x: jnp.where(done, e, x), GateMemory.empty(done.shape[0]), self
        )


def memory_features(
    memory: GateMemory, value: jax.Array, num_budgets: int, value_scale: float
) -> jax.Array:
    """`[B, K + 2]` the memory as the gate sees it at states of planner value `value`: the
    one-hot of the budget chosen last (all 0 before the first decision), the change of the
    planner's value since that decision (h-squashed like the value input; 0 at the first),
    and the frames since the last switch as f / (f + SINCE_HALF) in [0, 1)."""
    seen = memory.last >= 0
    last = jax.nn.one_hot(memory.last, num_budgets) * seen[:, None]
    change = jnp.where(seen, h_transform((value - memory.value) / value_scale), 0.0)
    since = memory.since.astype(jnp.float32)
    return jnp.concatenate([last, change[:, None], (since / (since + SINCE_HALF))[:, None]], -1)


@struct.dataclass
class GateDecision:
    """The gate's choice at `[B]` decision states."""

    index: jax.Array  # [B] int32 index into the budgets
    k: jax.Array  # [B] int32 the chosen budget
    probabilities: jax.Array  # [B, K] float32 the gate's distribution over the budgets
    log_prob: jax.Array  # [B] log-probability of `index`
    value: jax.Array  # [B] the frozen planner's value at the state (return units)
    baseline: jax.Array  # [B] the gate's own value (units of `Gate.value_scale`)
    inputs: GateInputs  # [B] what the gate saw (PPO stores it)
    #: [B] its memory after this decision (`GateConfig.memory`), else None.
    memory: GateMemory | None = None


class Gate:
    """A gate network over a frozen `Planner`: picks the budget k of each budgeted option.

    Pure: every method can be jitted or vmapped by the caller (training, evaluation and the
    planner service all call `decide`, so they agree on the decision for the same state).
    """

    def __init__(self, planner: Planner, config: GateConfig) -> None:
        if planner.kind is games.Kind.CLOCK:
            raise ValueError(
                f"{planner.config.game_id} is a clock game; its gate is recurrent (not this one)"
            )
        self.planner = planner
        self.config = config
        self.budgets = tuple(planner.config.budgets)
        net_cfg = planner.config.network
        #: Values inside the gate are in units of the planner's value support edge.
        self.value_scale = float(net_cfg.value_max) if net_cfg.value_bins else 1.0
        self.net = GateNet(config, len(self.budgets), self.value_scale)
        self._budget_arr = jnp.asarray(self.budgets, jnp.int32)

    def inputs(
        self,
        planner_params,
        states: games.State,
        out: NetOutput | None = None,
        memory: GateMemory | None = None,
    ):
        """The gate's `GateInputs` at `[B]` states: one frozen planner forward (none when the
        planner's output `out` at them is given). A gate with memory sees `memory` (None: an
        empty one, as at an episode's first decision)."""
        if out is None:
            out = self.planner.evaluate(planner_params, states)
        obs, time = jax.vmap(self.planner.inputs)(states)
        remembered = None
        if self.config.memory:
            memory = GateMemory.empty(out.value.shape[0]) if memory is None else memory
            remembered = memory_features(memory, out.value, len(self.budgets), self.value_scale)
        return GateInputs(
            obs=obs.astype(jnp.bfloat16),
            time=time,
            features=out.features,
            value=out.value,
            stats=planner_stats(out.logits, states.legal_action_mask),
            memory=remembered,
        )

    @property
    def future(self) -> Gate | None:
        """The `planner.options.Future` its options plan against: itself when its config's
        tree is "gate", None for the paper's always-k tree. Build its `OptionRunner` with
        `future=gate.future` and pass `future_params=gate.future_params(params)`."""
        return self if self.config.tree == "gate" else None

    def future_params(self, params):
        """What its options' `future_params` are: its own params with a gate tree, else None."""
        return params if self.config.tree == "gate" else None

    def runner(self, max_batch: int, devices: int = 1) -> OptionRunner:
        """An `OptionRunner` that plays this gate's options as it was trained to (its tree),
        each group split across `devices`."""
        return OptionRunner(self.planner, max_batch=max_batch, future=self.future, devices=devices)

    def choose(self, params, states: games.State, out: NetOutput) -> jax.Array:
        """The deployed (argmax) budget at `[B]` states whose planner output is `out`.

        This makes a gate a `planner.options.Future`: with `OptionRunner(planner, future=gate)`
        the tree expects the gate's own budgets at its deeper decision states. Inside a tree a
        gate with memory sees an empty one (the tree does not track its path's decisions).
        """
        logits, _ = self.apply(params, self.inputs(None, states, out))
        return self._budget_arr[jnp.argmax(logits, -1)]

    def apply(self, params, x: GateInputs) -> tuple[jax.Array, jax.Array]:
        """(`[B, K]` logits, `[B]` baseline in units of `value_scale`)."""
        return apply_gate(self.net, params, x)

    def decide(
        self,
        params,
        planner_params,
        states: games.State,
        key: jax.Array | None = None,
        memory: GateMemory | None = None,
    ) -> GateDecision:
        """The budget decision at `[B]` states: sampled with `key`, else the argmax (deployed).
        A gate with memory needs its `memory` (`GateMemory.empty` at an episode's start) and
        returns the next one in `GateDecision.memory`."""
        if self.config.memory and memory is None:
            raise ValueError(
                "this gate remembers its episode: pass its GateMemory (GateMemory.empty(B) at "
                "an episode's first decision)"
            )
        x = self.inputs(planner_params, states, memory=memory)
        logits, baseline = self.apply(params, x)
        log_p = jax.nn.log_softmax(logits)
        if key is None:
            index = jnp.argmax(logits, -1).astype(jnp.int32)
        else:
            index = jax.random.categorical(key, logits).astype(jnp.int32)
        return GateDecision(
            index=index,
            k=self._budget_arr[index],
            probabilities=jnp.exp(log_p),
            log_prob=jnp.take_along_axis(log_p, index[:, None], -1)[:, 0],
            value=x.value,
            baseline=baseline,
            inputs=x,
            memory=None
            if memory is None
            else memory.after(index, x.value, self._budget_arr[index]),
        )

    def init_params(self, key: jax.Array):
        """Fresh gate variables (jitted: one compile instead of one per initialiser op)."""
        planner_params = jax.eval_shape(self.planner.init_params, key)
        states = jax.eval_shape(lambda k: jax.vmap(self.planner.game.init)(k[None]), key)
        x = jax.eval_shape(self.inputs, planner_params, states)
        x = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), x)
        return jax.jit(self.net.init)(key, x.obs, x.time, x.features, x.value, x.stats, x.memory)

    def metadata(self) -> dict:
        """What `load_gate` checks: the network shape and the planner it gates."""
        return {
            "game": self.planner.config.game_id,
            "budgets": list(self.budgets),
            "gate_config": dataclasses.asdict(self.config),
            "value_scale": self.value_scale,
            "planner_config": config_to_dict(self.planner.config),
        }


def load_gate(path: str | os.PathLike, planner: Planner, *, planner_file=None):
    """(`Gate`, params, metadata) from a gate checkpoint over `planner`.

    Args:
        path: a `gate.msgpack` (what `train-gate` exports and `ship` copies).
        planner: the frozen planner the gate will run over.
        planner_file: that planner's checkpoint file; when the gate recorded its planner's
            sha256, the two must match (a gate is trained for one planner's exact weights).

    Raises:
        harness.checkpoint.CheckpointError: a corrupt file, or a gate for another game,
            other budgets, another planner shape, or another planner's weights.
    """
    meta = check_gate_file(path, planner, kind="gate", what="a gate", planner_file=planner_file)
    try:
        config = GateConfig(**meta["gate_config"])
    except (KeyError, TypeError, ValueError) as err:
        raise ckpt.CheckpointError(f"{path}: bad gate_config in its metadata: {err}") from err
    gate = Gate(planner, config)
    template = {"params": jax.eval_shape(gate.init_params, jax.random.PRNGKey(0))}
    tree, meta = ckpt.load(path, template)
    return gate, tree["params"], dict(meta, checkpoint=str(path))
