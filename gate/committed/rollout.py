"""The gate's rollouts for PPO on a committed game: the games of this process's devices played
`meta_steps` options at a time, only the chosen option computed per game (grouped by budget).

The rollout half of `gate.committed.train.GatePPO`, which owns the mesh, the update and the
checkpoint state and hands this class its devices' shards."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rtplan.gate.committed.config import GateTrainConfig
from rtplan.gate.committed.latency import draw_misses
from rtplan.gate.committed.policy import Gate, GateMemory
from rtplan.planner import actors as ac
from rtplan.planner.actors import Actors
from rtplan.planner.batching import OptionRunner
from rtplan.planner.options import OptionOutput

__all__ = ["GateRollout", "shard_key", "stack"]


def stack(steps: list):
    """Stacks a list of equal pytrees along a new leading axis, leaf by leaf.

    Not jitted: a jit over hundreds of steps would take thousands of arguments, and compiling
    that took minutes on XLA:CPU; one concatenation per leaf is cheap.
    """
    return jax.tree.map(lambda *x: jnp.stack(x), *steps)


def shard_key(key: jax.Array, index, devices: int) -> jax.Array:
    """Device `index`'s key of a step: `key` folded with it (one device: `key` itself)."""
    return key if devices == 1 else jax.random.fold_in(key, index)


class GateRollout:
    """Meta-steps of a frozen planner's options under a gate, on each local device.

    Each meta-step: one jitted call runs the frozen planner's forward and the gate at s_t and
    samples k; the `OptionRunner` runs option k for each game, grouped by k, so only the chosen
    options are computed (never all four); one jitted call takes the gate's value at the state
    the option ended in (the truncation bootstrap) and resets finished games. Under
    committed="plan" (the runner's planner) each game carries its plan in `Actors.plan`: every
    option commits to the plan its game carries, the plan it leaves replaces it, and a reset
    game starts with none (`planner.actors.advance`), as `planner.episodes.play_from` threads
    plans in evaluation. With miss
    probabilities (a simulated deployment, `gate.committed.latency`) each option misses with its
    budget's probability, drawn from the meta-step's sampling key, and a missed option's
    landing frame plays the fallback.

    Args:
        cfg: the run's config (meta_steps, reward_mode, truncation_bootstrap, the fallback).
        gate: the gate trained.
        runner: the options' runner (the gate's own when the options' trees expect it).
        shards: this process's (mesh index, device) pairs, in mesh order.
        planner_params: the frozen planner's variables on each local device, in shard order.
        devices: the mesh's device count (the keys fold in the device index when above 1).
        miss_probs: `[K]` each budget's miss probability, or None (no simulated deployment).
    """

    def __init__(
        self,
        cfg: GateTrainConfig,
        gate: Gate,
        runner: OptionRunner,
        shards: list,
        planner_params: list,
        *,
        devices: int,
        miss_probs: jax.Array | None = None,
    ) -> None:
        self.cfg = cfg
        self.gate = gate
        self.game = gate.planner.game
        self.runner = runner
        self.shards = shards
        self.planner_params = planner_params
        self.devices = devices
        self.miss_probs = miss_probs
        self._budgets = np.asarray(gate.budgets)
        self._decide = jax.jit(self._decide_fn)
        self._finish = jax.jit(self._finish_fn)
        self.init_actors = jax.jit(self._init_actors_fn, static_argnums=1)
        self._draw_misses = jax.jit(draw_misses)

    # ---- pure pieces (jitted in __init__) ----

    def _decide_fn(self, params, planner_params, states, key, memory):
        d = self.gate.decide(params, planner_params, states, key, memory)
        return d.inputs, d.index, d.log_prob, d.baseline, d.memory

    def _init_actors_fn(self, key, n: int) -> Actors:
        keys = jax.random.split(key, (n, 2))
        pcfg = self.gate.planner.config
        horizon = pcfg.plan_horizon if pcfg.committed == "plan" else None
        return ac.start(jax.vmap(self.game.init)(keys[:, 0]), keys[:, 1], plan_horizon=horizon)

    def _finish_fn(
        self, params, planner_params, actors: Actors, out: OptionOutput, reset_keys, memory
    ):
        """The step's record (reward, frames, ends, bootstrap value), the reset games and the
        gate's memory (`memory` after this decision; emptied where a game was reset)."""
        frames = out.next_state.frame - actors.states.frame
        reward = out.reward if self.cfg.reward_mode == "raw" else out.discounted_reward
        x = self.gate.inputs(planner_params, out.next_state, memory=memory)
        _, next_value = self.gate.apply(params, x)
        truncated = out.truncated & ~out.terminated
        if not self.cfg.truncation_bootstrap:
            truncated = jnp.zeros_like(truncated)
        terminated = out.terminated | (out.truncated & ~truncated)
        record = dict(
            reward=reward / self.gate.value_scale,
            next_value=next_value,
            frames=frames,
            terminated=terminated,
            truncated=truncated,
        )
        fresh = jax.vmap(self.game.init)(reset_keys)
        actors, stats = ac.advance(actors, out, fresh, actors.keys)
        if memory is not None:
            memory = memory.reset(out.done)  # the games `advance` restarted
        return actors, record, stats, memory

    # ---- the rollout ----

    @staticmethod
    def option_keys(keys: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(carried, option, reset) per-game keys `[B, 2]` split from `keys` `[B, 2]`."""
        split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
        return split[:, 0], split[:, 1], split[:, 2]

    def __call__(
        self,
        params: list,
        actors: tuple[Actors, ...],
        key: jax.Array,
        memories: tuple[GateMemory, ...] | None = None,
    ):
        """`meta_steps` meta-steps of the games of this process's devices, the devices' steps
        interleaved (each waits on its own k only, so the devices run side by side).

        Args:
            params: the gate variables on each local device, in shard order.
            actors: each local device's `[B / D]` games, on its device.
            key: the rollout's key (each meta-step splits one off, folded per device).
            memories: a gate with memory: each local device's `[B / D]` memories of its games;
                None otherwise.

        Returns:
            (actors, steps, stats, memories), steps and stats one per local device,
            time-major `[T, B / D]` on its device: the decisions' records, and the
            `planner.actors.advance` stats per meta-step `[T, 1]` (with a simulated deployment
            also `missed` `[T, B / D]`); memories as passed in, after the rollout.
        """
        if self.gate.config.memory != (memories is not None):
            raise ValueError("pass the games' memories exactly when the gate has memory")
        actors = list(actors)
        memories = list(memories) if memories is not None else [None] * len(actors)
        steps = [[] for _ in self.shards]
        stats = [[] for _ in self.shards]
        for _ in range(self.cfg.meta_steps):
            key, sample_key = jax.random.split(key)
            for j, (i, device) in enumerate(self.shards):
                k = jax.device_put(shard_key(sample_key, i, self.devices), device)
                actors[j], step, stat, memories[j] = self._meta_step(
                    params[j], self.planner_params[j], actors[j], k, memories[j]
                )
                steps[j].append(step)
                stats[j].append(stat)
        stats = [
            {n: x if n == "missed" else x[:, None] for n, x in stack(s).items()} for s in stats
        ]
        kept = tuple(memories) if self.gate.config.memory else None
        return tuple(actors), [stack(s) for s in steps], stats, kept

    def _meta_step(self, params, planner_params, actors: Actors, sample_key: jax.Array, memory):
        """One meta-step of one device's games: (actors, the step's record, its stats, the
        gate's memory after it)."""
        x, action, log_prob, value, memory = self._decide(
            params, planner_params, actors.states, sample_key, memory
        )
        carried, option_keys, reset_keys = self.option_keys(actors.keys)
        ks = self._budgets[np.asarray(action)]
        latency = {}
        if self.miss_probs is not None:
            miss = self._draw_misses(sample_key, action, self.miss_probs)
            latency = dict(miss=miss, fallback=self.cfg.latency_fallback)
        out = self.runner(
            planner_params,
            option_keys,
            actors.states,
            ks,
            future_params=self.gate.future_params(params),
            **latency,
            **({} if actors.plan is None else dict(plan=actors.plan)),
        )
        actors, record, stat, memory = self._finish(
            params, planner_params, actors.replace(keys=carried), out, reset_keys, memory
        )
        if latency:
            stat = dict(stat, missed=latency["miss"])
        record = dict(record, inputs=x, action=action, log_prob=log_prob, value=value)
        return actors, record, stat, memory
