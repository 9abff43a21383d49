"""Mixed-budget batches: each game chose its own k; only the chosen options are computed.

A `lax.switch` under `vmap` runs every branch, so the reference computed all four options for
every game and kept one (4x the cost). Here the host groups the games by k and runs one jitted
option per group, padded up to a size from a fixed ladder so each (k, size) compiles once. The
ladder grows by at most 25% per rung, which bounds the padding waste. Because every game carries
its own PRNG key, a game's result does not depend on its group: grouped == one by one. Under
`committed="plan"` each game's previous plan is gathered with it and its new plan scattered back.

XLA:CPU runs a search on about one core; with `devices` > 1 each group's option is split
across that many (host) devices with `jax.shard_map`, as planner training does
(`XLA_FLAGS=--xla_force_host_platform_device_count=N`, set by the CLI's `--devices`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from rtplan import games
from rtplan.planner.options import Future, OptionOutput, Planner

#: A budget of 0 in `OptionRunner`'s `ks` skips the game (no option is computed for it).
SKIP = 0
#: The mesh axis a group's games are split along (`OptionRunner(devices=N)`).
AXIS = "games"
#: The `OptionRunner` ladder's growth per rung. Each (k, group size) is its own XLA:CPU
#: executable holding ~1,000 memory mappings; doubling keeps a runner at
#: `len(budgets) * (log2(max_batch) + 2)` executables (4 budgets, 100 games: 32, ~34k mappings),
#: under the kernel's default `vm.max_map_count` of 65,530, where a 1.25 ladder compiled up to 84
#: (~90k) over a long evaluation or gate training run. The price is padding: ~25% on average.
GROWTH = 2.0


def bucket_ladder(max_size: int, growth: float = 1.25, multiple: int = 1) -> tuple[int, ...]:
    """Sizes 1, 2, 3, ... growing by at most `growth` per rung, up to >= `max_size`, each
    rounded up to a multiple of `multiple` (a group split across that many devices)."""
    sizes = [1]
    while sizes[-1] < max_size:
        sizes.append(max(sizes[-1] + 1, int(sizes[-1] * growth)))
    return tuple(sorted({-(-s // multiple) * multiple for s in sizes}))


class OptionRunner:
    """Runs options for a batch in which every game has its own budget k.

    One jitted call per k present: it gathers that group's games (indices padded up to a
    ladder size with copies of the group's first game), runs option k on them and scatters
    the results into the batch's output, all on device. A copy computes exactly what its
    original does (same key, same state), so writing it twice is harmless. Compiled once per
    (k, group size, batch size).

    With a `future` (the gate's model of later budgets, see `planner.options.Future`) every call
    takes that future's parameters as `future_params`. With `devices` > 1 each group (padded to
    a multiple of `devices`) is split across the first `devices` JAX devices; a game's result is
    the same either way.
    """

    def __init__(
        self,
        planner: Planner,
        *,
        max_batch: int = 1024,
        growth: float = GROWTH,
        future: Future | None = None,
        devices: int = 1,
    ) -> None:
        available = len(jax.devices())
        if not 1 <= devices <= available:
            raise ValueError(
                f"devices={devices} but JAX sees {available} device(s); on CPU set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={devices} before jax is "
                "imported (the CLI's --devices does this)"
            )
        self.planner = planner
        self.future = future
        self.devices = devices
        self._mesh = Mesh(np.array(jax.devices()[:devices]), (AXIS,)) if devices > 1 else None
        self._device = jax.devices()[0]  # where a single-device runner commits its inputs
        self.ladder = bucket_ladder(max_batch, growth, devices)
        self.max_k = max(planner.config.budgets)
        # A committed option plays k actions, a clock option one move (k labels its budget).
        self._width = 1 if planner.kind is games.Kind.CLOCK else self.max_k
        self._group = {
            k: jax.jit(functools.partial(self._run_group, k=k), static_argnames="fallback")
            for k in self.budgets
        }
        self._empty = jax.jit(self._empty_output)

    @property
    def budgets(self) -> tuple[int, ...]:
        return tuple(self.planner.config.budgets)

    def bucket(self, n: int) -> int:
        """The padded size a group of `n` games runs at."""
        for size in self.ladder:
            if size >= n:
                return size
        raise ValueError(f"group of {n} games exceeds the largest bucket {self.ladder[-1]}")

    def _padded_option(
        self,
        params,
        keys,
        states,
        future_params,
        miss=None,
        plan=None,
        *,
        k: int,
        fallback: str = "game",
    ) -> OptionOutput:
        plan, plan_len = (None, None) if plan is None else plan
        out = self.planner.option(
            params,
            keys,
            states,
            k,
            future=self.future,
            future_params=future_params,
            miss=miss,
            fallback=fallback,
            plan=plan,
            plan_len=plan_len,
        )
        pad = self._width - out.actions.shape[1]
        return out.replace(
            actions=jnp.pad(out.actions, ((0, 0), (0, pad)), constant_values=-1),
            planned=jnp.pad(out.planned, ((0, 0), (0, pad)), constant_values=False),
        )

    def _run_group(
        self,
        params,
        keys,
        states,
        idx,
        acc: OptionOutput,
        future_params,
        miss=None,
        plan=None,
        *,
        k: int,
        fallback: str = "game",
    ):
        sub_keys, sub_states = jax.tree.map(lambda x: x[idx], (keys, states))
        args, specs = (params, sub_keys, sub_states, future_params), (P(), P(AXIS), P(AXIS), P())
        if miss is not None:
            args, specs = (*args, miss[idx]), (*specs, P(AXIS))
        option = functools.partial(self._padded_option, k=k, fallback=fallback)
        if plan is not None:  # the plan rides last, after the misses if any
            args, specs = (*args, jax.tree.map(lambda x: x[idx], plan)), (*specs, P(AXIS))
            option = functools.partial(self._planned_option, option, miss is not None)
        if self._mesh is not None:
            # check_vma=False: mctx's while_loop carries mix per-device and replicated values.
            option = jax.shard_map(
                option, mesh=self._mesh, in_specs=specs, out_specs=P(AXIS), check_vma=False
            )
        out = option(*args)
        return jax.tree.map(lambda a, o: a.at[idx].set(o), acc, out)

    @staticmethod
    def _planned_option(option, with_miss: bool, *args):
        """`option(params, keys, states, future_params, miss, plan)` from positional `args`
        that hold `miss` only when `with_miss` (shard_map takes arrays, not None)."""
        *head, plan = args
        miss = head.pop() if with_miss else None
        return option(*head, miss, plan)

    def _empty_output(self, params, keys, states, future_params) -> OptionOutput:
        # Under committed="plan" the output carries a plan whatever the input: none here.
        shapes = jax.eval_shape(
            functools.partial(self._padded_option, k=self.budgets[0]),
            params,
            keys,
            states,
            future_params,
        )
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    @property
    def by_plan(self) -> bool:
        """The planner commits to the previous plan (`PlannerConfig.committed` "plan"): every
        call takes the games' plans."""
        return self.planner.config.committed == "plan"

    def _plan_arg(self, plan, batch: int):
        """The `plan` argument of a group call: (plan, plan_len) under "plan" (none given: no
        plan), None under "reflex" (where a plan is refused)."""
        if not self.by_plan:
            if plan is not None:
                raise ValueError("this OptionRunner's planner commits to the reflex: no plan")
            return None
        if plan is None:
            return self.planner.empty_plan(batch)
        plan, plan_len = plan
        want = (batch, self.planner.config.plan_horizon)
        if tuple(plan.shape) != want or tuple(plan_len.shape) != (batch,):
            raise ValueError(f"plan has shape {tuple(plan.shape)}; expected {want} and ({batch},)")
        return jnp.asarray(plan, jnp.int32), jnp.asarray(plan_len, jnp.int32)

    def _check_future(self, future_params) -> None:
        if (self.future is None) != (future_params is None):
            need = "needs its future's parameters" if future_params is None else "has no future"
            raise ValueError(f"this OptionRunner {need} (future_params)")

    def compile(
        self, params, keys: jax.Array, states: games.State, sizes=None, future_params=None
    ) -> None:
        """Compiles every (k, group size) for this batch size ahead of time (e.g. at start-up)."""
        self._check_future(future_params)
        batch = keys.shape[0]
        acc = self._empty(params, keys, states, future_params)
        plan = {} if not self.by_plan else dict(plan=self._plan_arg(None, batch))
        for size in sizes or [s for s in self.ladder if s <= self.bucket(batch)]:
            idx = jnp.zeros((size,), jnp.int32)
            for fn in self._group.values():
                jax.block_until_ready(fn(params, keys, states, idx, acc, future_params, **plan))

    def __call__(
        self,
        params,
        keys: jax.Array,
        states: games.State,
        ks,
        future_params=None,
        *,
        miss: jax.Array | None = None,
        fallback: str = "game",
        plan: tuple[jax.Array, jax.Array] | None = None,
    ) -> OptionOutput:
        """Runs option `ks[i]` on game i.

        Args:
            params: network parameters.
            keys: `[B]` PRNG keys, one per game.
            states: `[B]` decision states.
            ks: `[B]` host ints, each in the planner's budgets, or 0 to skip that game (an
                evaluation's finished games): its output rows stay zero.
            miss: `[B]` bool, True where game i's planned action missed its deadline: its
                landing frame plays the `fallback` (`Planner.option`); None: none missed.
            fallback: "game" or "reflex" (`planner.options.FALLBACKS`).
            plan: committed="plan" only: (`[B, H]` plans, `[B]` lengths), each game's previous
                option's `plan`/`plan_len`; None: no plan (every committed frame the reflex).

        Returns:
            An `OptionOutput` over the batch with `actions`/`planned` padded to the largest
            budget (`-1` / False past a game's own k); in clock games one move each. Under
            "plan" it holds each game's new plan (a skipped game's: none).
        """
        self._check_future(future_params)
        ks = np.asarray(ks)
        batch = keys.shape[0]
        if ks.shape != (batch,):
            raise ValueError(f"ks has shape {ks.shape}; expected one budget per game: ({batch},)")
        if miss is not None and tuple(miss.shape) != (batch,):
            raise ValueError(f"miss has shape {tuple(miss.shape)}; expected ({batch},)")
        unknown = set(ks.tolist()) - {*self.budgets, SKIP}
        if unknown:
            raise ValueError(f"budgets {sorted(unknown)} not in {self.budgets}")
        plan = self._plan_arg(plan, batch)
        if self._mesh is None:
            # Committed to the device: host arrays, and arrays a jit left uncommitted, would
            # each key one more compile of every option (the gate's evaluation compiled each
            # twice beside the rollout's); on arrays already there this copies nothing.
            params, keys, states, future_params, miss, plan = jax.device_put(
                (params, keys, states, future_params, miss, plan), self._device
            )
        out = self._empty(params, keys, states, future_params)
        for k in sorted(set(ks.tolist()) - {SKIP}):
            idx = np.flatnonzero(ks == k)
            padded = np.concatenate([idx, np.full(self.bucket(len(idx)) - len(idx), idx[0])])
            idx32 = padded.astype(np.int32)
            # Under "reflex" the programs are those it always had (no plan argument).
            by_plan = {} if plan is None else dict(plan=plan)
            if miss is None:  # the program without misses, as it always was
                out = self._group[k](params, keys, states, idx32, out, future_params, **by_plan)
            else:
                out = self._group[k](
                    params,
                    keys,
                    states,
                    idx32,
                    out,
                    future_params,
                    miss,
                    fallback=fallback,
                    **by_plan,
                )
        return out
