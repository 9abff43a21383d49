"""A planner's compiled value function and options per budget k: warmed, timed, batch-bucketed."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import struct

from rtplan import games
from rtplan.planner.batching import bucket_ladder
from rtplan.planner.options import OptionOutput, Planner

__all__ = ["CompiledOptions", "Evaluation", "Executable", "OptionPlan", "plan_fields"]

#: `Executable.kind` of the network's value and reflex move at s_t.
VALUE = "value"
#: `Executable.kind` of an option of budget k.
OPTION = "option"


@struct.dataclass
class Evaluation:
    """The network at `[B]` decision states."""

    value: jax.Array  # [B] value for the player to move
    reflex: jax.Array  # [B] int32 the policy's most likely legal action (the k = 0 move)


@struct.dataclass
class OptionPlan:
    """What a plan sends of an option's output `[B]` (the rest never leaves the device)."""

    actions: jax.Array  # [B, k] int32 every frame action of the option, in play order
    planned: jax.Array  # [B, k] bool True where MCTS chose the action, False for reflex
    visit_counts: jax.Array  # [B, A] int32 root visit counts
    search_value: jax.Array  # [B] MCTS value of the root
    root_value: jax.Array  # [B] the network's value at the decision state s_t
    cost: jax.Array  # [B] clock ticks charged (clock games; 0 in committed games)
    # committed="plan" only (None under "reflex"): `OptionOutput.plan`/`plan_len`, the plan the
    # next option commits to.
    plan: jax.Array | None = None  # [B, H] int32, -1 past plan_len
    plan_len: jax.Array | None = None  # [B] int32


def plan_fields(out: OptionOutput) -> OptionPlan:
    """The `OptionPlan` of an option's output."""
    return OptionPlan(
        actions=out.actions,
        planned=out.planned,
        visit_counts=out.visit_counts,
        search_value=out.search_value,
        root_value=out.root_value,
        cost=out.cost,
        plan=out.plan,
        plan_len=out.plan_len,
    )


class Executable(NamedTuple):
    """The key of one compiled executable: what it computes, for which budget, at which size."""

    kind: str  # VALUE, OPTION, or a subclass's kind (the gate's decision, its gated options)
    k: int  # the budget (0 for the kinds that have none)
    size: int  # the padded batch size (a rung of the bucket ladder)


class CompiledOptions:
    """A planner's value function and its option per budget k, compiled ahead of time.

    Every call pads its batch `[n]` (copies of row 0) up to the next rung of a bucket ladder
    (`planner.batching.bucket_ladder`, at most 25% padding) and compiles once per (kind, k,
    rung), so however many distinct batch sizes a long-lived process serves it holds at most
    `len(ladder)` executables per kind and budget. Each XLA:CPU executable maps memory; an
    unbounded set of them once exhausted the kernel's default `vm.max_map_count` (65530).
    A padded row computes what row 0 does (same key, same state), so results do not depend
    on the rung.

    Executables are compiled with `jax.jit(...).lower(...).compile()`, so a call never traces
    once its rung is compiled; XLA compiles outside the GIL, so `warm_jobs` can run on a thread
    pool. Outputs come back as host numpy arrays.
    """

    def __init__(
        self,
        planner: Planner,
        params: Any,
        *,
        max_batch: int = 1,
        ladder: Sequence[int] | None = None,
        device: jax.Device | None = None,
        compiler_options: Mapping[str, object] | None = None,
    ) -> None:
        """
        Args:
            planner: the planner (its config's `gumbel_scale` is the search's; 0 for serving).
            params: its network parameters (moved to `device` when one is given).
            max_batch: the largest batch a call may pass.
            ladder: the batch sizes calls run at (ascending); None: `bucket_ladder(max_batch)`.
            device: where the parameters live and the executables run (None: JAX's default).
            compiler_options: XLA options for every compile (e.g.
                `{"xla_backend_optimization_level": 0}` compiles faster and runs slower).
        """
        self.planner = planner
        self.device = device
        self.params = params if device is None else jax.device_put(params, device)
        self.ladder = tuple(ladder) if ladder is not None else bucket_ladder(max_batch)
        self.compiler_options = dict(compiler_options or {})
        self._executables: dict[Executable, Any] = {}

    # ---- what is compiled ----

    @property
    def budgets(self) -> tuple[int, ...]:
        return tuple(self.planner.config.budgets)

    @property
    def executables(self) -> int:
        """How many executables are compiled so far."""
        return len(self._executables)

    def kinds(self) -> list[tuple[str, int]]:
        """The (kind, k) pairs `warm_jobs` compiles: the value, then each budget's option."""
        return [(VALUE, 0), *((OPTION, k) for k in self.budgets)]

    def gated_kinds(self) -> tuple[str, ...]:
        """The kinds a gated request runs (its gate's decision and the options it plays), so a
        server can compile them first and play gated before the forced budgets are compiled;
        none without a gate."""
        return ()

    def _fn(self, kind: str, k: int) -> tuple[Callable, tuple]:
        """(pure function, its leading arguments before (keys,) states) of an executable."""
        if kind == VALUE:
            return functools.partial(_evaluate, self.planner), (self.params,)
        if kind == OPTION:
            return functools.partial(_option, self.planner, k=k), (self.params,)
        raise ValueError(f"unknown executable kind {kind!r}")

    def _takes_keys(self, kind: str) -> bool:
        return kind != VALUE

    def _takes_plan(self, kind: str) -> bool:
        """Whether `kind` follows each game's previous plan: an option under committed="plan"
        (one executable, whether a game has a plan or not: no plan is `Planner.empty_plan`)."""
        return kind == OPTION and self.planner.config.committed == "plan"

    def bucket(self, n: int) -> int:
        """The padded size a batch of `n` runs at."""
        for size in self.ladder:
            if size >= n:
                return size
        raise ValueError(f"a batch of {n} exceeds the largest bucket {self.ladder[-1]}")

    # ---- running ----

    def _run(self, kind: str, k: int, keys, states: games.State, plan=None):
        exe, lead, args, n, size = self._prepare(kind, k, keys, states, plan)
        out = jax.device_get(exe(*lead, *args))
        return out if size == n else jax.tree.map(lambda x: x[:n], out)

    def _prepare(self, kind: str, k: int, keys, states: games.State, plan=None):
        """(executable, its leading inputs, its arguments, batch, padded batch) of a call,
        compiled here on its first use."""
        n = jax.tree.leaves(states)[0].shape[0]
        size = self.bucket(n)
        fn, lead = self._fn(kind, k)
        args = (keys, states) if self._takes_keys(kind) else (states,)
        if self._takes_plan(kind):
            plan = plan if plan is not None else self.planner.empty_plan(n)
            args = (*args, *(np.asarray(x, np.int32) for x in plan))
        elif plan is not None:
            raise ValueError(
                f'a plan is followed by an option under committed="plan" only; {kind} k={k} '
                f'of {self.planner.config.game_id} plays committed="'
                f'{self.planner.config.committed}"'
            )
        if size != n:
            args = jax.tree.map(lambda x: _pad(x, size), args)
        key = Executable(kind, k, size)
        exe = self._executables.get(key)
        if exe is None:
            # Two threads may race to compile the same key: both results are the same program.
            lowered = jax.jit(fn).lower(*lead, *args)
            exe = self._executables[key] = lowered.compile(self.compiler_options or None)
        return exe, lead, args, n, size

    def evaluate(self, states: games.State) -> Evaluation:
        """The network's value and reflex move at `[B]` states (host arrays)."""
        return self._run(VALUE, 0, None, states)

    def option(self, k: int, keys, states: games.State, plan=None) -> OptionPlan:
        """Option k from `[B]` states with per-game PRNG `keys` `[B, 2]` (host arrays).

        `plan`: committed="plan" only, each game's previous plan `(plan [B, H] int32, plan_len
        [B] int32)` (`Planner.option`'s); None: no plan (the reflex). Its output then carries
        the plan for the next option.

        Raises:
            ValueError: k is not one of the planner's budgets, the batch is too large, or a
                plan under committed="reflex".
        """
        if k not in self.budgets:
            raise ValueError(f"k={k} is not one of the budgets {self.budgets}")
        return self._run(OPTION, k, keys, states, plan)

    def compile_option(self, k: int, state: games.State) -> None:
        """Compiles option k for one unbatched `state` without running it: a program compiled
        beside a live game must not hold the device for a search (a running search blocks
        every other call until it ends: the GTP engine's ladder)."""
        if k not in self.budgets:
            raise ValueError(f"k={k} is not one of the budgets {self.budgets}")
        states = jax.tree.map(lambda x: np.asarray(x)[None], state)
        self._prepare(OPTION, k, np.zeros((1, 2), np.uint32), states)

    def call(self, kind: str, k: int, keys, states: games.State, plan=None):
        """The executable (kind, k) on `[B]` states (`keys` ignored by the keyless kinds;
        `plan` as in `option`)."""
        return self._run(kind, k, keys, states, plan)

    # ---- warm-up and timing ----

    def warm_jobs(
        self, state: games.State, sizes=(1,), kinds: Sequence[str] | None = None
    ) -> list[Callable[[], None]]:
        """One callable per executable of `kinds()` (those of `kinds` only, when given) at each
        batch size in `sizes`: it compiles the executable and runs it once on copies of the
        unbatched `state` (first-call allocations happen there, not in a request). Run them in
        any order, on any threads."""
        jobs = []
        for size in sizes:
            states = jax.tree.map(functools.partial(_copies, n=size), state)
            for kind, k in self.kinds():
                if kinds is not None and kind not in kinds:
                    continue
                lead = self._warm_inputs(kind, size)
                jobs.append(functools.partial(self.call, kind, k, lead, states))
        return jobs

    def _warm_inputs(self, kind: str, size: int):
        """The per-game input a warm-up passes before the states of `kind` (zero keys)."""
        return np.zeros((size, 2), np.uint32)

    def warm(self, state: games.State, sizes=(1,)) -> None:
        """Runs every `warm_jobs` job here."""
        for job in self.warm_jobs(state, sizes):
            job()

    def measure(self, k: int, state: games.State, *, repeats: int = 3) -> float:
        """Median wall seconds of option k from one unbatched `state` (compiled first), host
        transfers included."""
        states = jax.tree.map(lambda x: np.asarray(x)[None], state)
        keys = np.zeros((1, 2), np.uint32)
        self.option(k, keys, states)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            self.option(k, keys, states)
            times.append(time.perf_counter() - start)
        return statistics.median(times)


def _copies(x, n: int) -> np.ndarray:
    """`n` copies of `x` along a new leading axis (on the host)."""
    return np.repeat(np.asarray(x)[None], n, 0)


def _pad(x, size: int) -> np.ndarray:
    """`x` `[n, ...]` padded to `[size, ...]` with copies of its row 0 (on the host)."""
    x = np.asarray(x)
    return np.concatenate([x, np.repeat(x[:1], size - x.shape[0], 0)])


def _evaluate(planner: Planner, params, states) -> Evaluation:
    out = planner.evaluate(params, states)
    return Evaluation(
        value=out.value, reflex=planner.masked_argmax(out.logits, states.legal_action_mask)
    )


def _option(
    planner: Planner, params, keys, states, plan=None, plan_len=None, *, k: int
) -> OptionPlan:
    """Option k with only the fields a plan sends (following `plan` under committed="plan")."""
    return plan_fields(planner.option(params, keys, states, k, plan=plan, plan_len=plan_len))
