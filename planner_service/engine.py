"""The planner service's core: served games compiled ahead, each request's decision and plan.

One class, `Engine`, past ~450 lines: loading and warming the served games, the request checks,
the gate's decision and the (batched) plan all read the one table of loaded games and its lock,
and splitting them would pass that table between modules. The batcher's queueing is its own
module (`_batcher`), the answers' types are `_answers`, the errors `_errors`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rtplan import games, wire
from rtplan.gate.clock.gate import ClockGateCarry
from rtplan.gate.compiled import GATED
from rtplan.harness import checkpoint as ckpt
from rtplan.planner import landing_frame
from rtplan.planner.compiled import OPTION
from rtplan.planner_service._answers import GATE, POLICY_ONLY, Decision, Plan
from rtplan.planner_service._batcher import Batcher, BatchStats, not_started_why, search_rungs
from rtplan.planner_service._errors import (
    BudgetError,
    EngineError,
    GatedOnlyError,
    GateLoadError,
    InvalidRequestError,
    NoGateError,
    NotLoadedError,
    NotReadyError,
    NotStartedError,
    StateError,
)
from rtplan.planner_service._loading import DeviceError, LoadedGame, load_game, resolve_device
from rtplan.planner_service._run import (
    _batch,
    _budget,
    _check_gate_state,
    _check_plan,
    _clock_gate,
    _gate,
    _policy_only,
    _run_option,
    _run_options,
    _stack,
    _value,
)
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.v1 import tensor_pb2

__all__ = [
    "GATE",
    "POLICY_ONLY",
    "BatchStats",
    "BudgetError",
    "ClockGateCarry",
    "Decision",
    "DeviceError",
    "Engine",
    "EngineError",
    "GatedOnlyError",
    "GateLoadError",
    "InvalidRequestError",
    "LoadedGame",
    "NoGateError",
    "NotLoadedError",
    "NotReadyError",
    "NotStartedError",
    "Plan",
    "StateError",
    "resolve_device",
]

#: How a missing checkpoint's message names the override.
_FOLDER = "--checkpoint-dir (RTPLAN_PLANNER_CHECKPOINT_DIR)"
#: The executables that search (compiled at the search rungs); the rest (the value, the
#: gates' decisions) run at batch 1, on the requests' own threads, ahead of any search.
SEARCH_KINDS = (OPTION, GATED)


class Engine:
    """Serves planning requests for a set of games on one device (no gRPC here).

    Search is deterministic (`gumbel_scale = 0`). With `max_batch` 1 every search runs alone at
    batch 1, one executable per budget k. With `max_batch` > 1, searches of the same game, kind
    (forced or gated) and k that wait together run as one batched call (`_batcher.Batcher`)
    at a rung of `search_rungs(max_batch)` (2, 4, 8, ...: one executable per k and rung); each
    request keeps its own seed and state, so its answer is the same in any batch. Decisions
    (the value, the gate) stay at batch 1 and never wait for a search.
    Call `compile()` once before serving: a request for a game whose executables are not
    compiled yet raises `NotReadyError`.
    Executables are compiled ahead of time, so a request can never trigger a compile (a
    mismatched input raises instead). Methods are thread-safe; JAX releases the GIL while a
    search runs.
    """

    def __init__(
        self,
        checkpoints: Mapping[str, str | Path],
        *,
        gates: Mapping[str, str | Path] | None = None,
        device: str | jax.Device = "cpu",
        compiler_options: Mapping[str, object] | None = None,
        max_batch: int = 1,
        batch_slots: int = 2,
        batch_wait_s: float = 0.002,
        gated_only: bool = False,
        rules: Mapping[str, object] | None = None,
    ) -> None:
        """Loads one planner per game, and the gates of those that have one.

        Args:
            checkpoints: game id -> planner checkpoint path (`planner.store.save_planner` format).
            gates: game id -> gate checkpoint path (`gate.committed.policy.load_gate` format) for
            the games
                whose `gate` budget lets the gate pick k; the others serve forced k only.
            device: where parameters live and searches run (`resolve_device` spec or a device).
            compiler_options: XLA options for every compile, e.g.
                `{"xla_backend_optimization_level": 0}` compiles ~40% faster on CPU and runs
                slightly slower (tests use it).
            max_batch: the most requests one batched search holds; 1: no batching.
            batch_slots: batched searches that may run at once (with `max_batch` > 1).
            batch_wait_s: the longest a search waits for others to join it while a slot is
                free (less when its deadline needs the time).
            gated_only: a game with a gate serves gated requests only: its forced budgets are
                never compiled, and a forced k raises `GatedOnlyError`.
            rules: the committed-action games' rules of play (`committed`, `tree_k`; a None
                value keeps the checkpoint's), as `planner.configs.with_rules`; a clock game
                keeps its own. Under committed "plan" each request carries its plan.

        Raises:
            games.UnknownGameError: a game id that is not registered.
            DeviceError: the device does not exist.
            ValueError / CheckpointError: a checkpoint that does not load or is for another game,
                or `rules` it cannot play under.
            GateLoadError: a gate that does not load over its game's planner (names the file).
        """
        self.device = resolve_device(device) if isinstance(device, str) else device
        self._ready = threading.Event()
        self._stop = threading.Event()
        #: Per served game: set once its executables are compiled (games compile in load order).
        self._game_ready: dict[str, threading.Event] = {}
        #: ... and once the executables of its gated requests are (they compile first).
        self._gate_ready: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._compiled = 0
        self._compiler_options = dict(compiler_options or {})
        self._games: dict[str, LoadedGame] = {}
        self.max_batch = max_batch
        self.gated_only = gated_only
        #: The batch sizes searches run at.
        self.search_rungs = search_rungs(max_batch) if max_batch > 1 else (1,)
        self._batcher = None
        #: Unbatched: (game, kind, k) -> seconds of a fast search of late (for `deadline`).
        self._search_s: dict[tuple[str, str, int], float] = {}
        #: Searches dropped unstarted (unbatched; the batcher counts its own in `batch_stats`).
        self.not_started = 0
        if max_batch > 1:
            self._batcher = Batcher(
                self._run_batch, max_batch=max_batch, slots=batch_slots, max_wait_s=batch_wait_s
            )
        gates = dict(gates or {})
        if extra := sorted(set(gates) - set(checkpoints)):
            raise NotLoadedError(f"gate checkpoints for {', '.join(extra)} without a planner")
        for game_id, path in checkpoints.items():
            games.game_class(game_id)  # UnknownGameError names the registered games
            gate = gates.get(game_id)
            self._games[game_id] = load_game(
                game_id,
                str(path),
                gate and str(gate),
                self.device,
                self._compiler_options,
                ladder=tuple(sorted({1, *self.search_rungs})),
                rules=rules,
            )
            self._game_ready[game_id] = threading.Event()
            self._gate_ready[game_id] = threading.Event()

    @classmethod
    def from_dir(
        cls,
        checkpoint_dir: str | Path,
        *,
        game_ids: Iterable[str] | None = None,
        device: str | jax.Device = "cpu",
        compiler_options: Mapping[str, object] | None = None,
        **batching: Any,
    ) -> Engine:
        """Loads `harness.checkpoint.planner_path(checkpoint_dir, game)` for each game, and
        `gate_path(checkpoint_dir, game)` where that file exists (a missing gate is no error: that
        game serves forced k).

        Args:
            checkpoint_dir: folder with one sub-folder per game.
            game_ids: the games to serve; None serves every registered game that has a checkpoint.
            device, compiler_options, batching (`max_batch`, `batch_slots`, `batch_wait_s`,
                and `gated_only`, `rules`): see `__init__`.

        Raises:
            NotLoadedError: a requested game has no checkpoint there, or none has one.
            GateLoadError: a gate file that is there but does not load.
        """
        device = resolve_device(device) if isinstance(device, str) else device  # fail first
        root = Path(checkpoint_dir)
        if game_ids is None:
            wanted = [g for g in games.registered_games() if ckpt.planner_path(root, g).is_file()]
            if not wanted:
                raise NotLoadedError(
                    f"no {ckpt.PLANNER_FILE} of a registered game under {root}: pass {_FOLDER}"
                )
        else:
            wanted = list(game_ids)
        paths = {}
        for game_id in wanted:
            games.game_class(game_id)  # UnknownGameError names the registered games
            try:
                paths[game_id] = ckpt.planner_file(game_id, root=root, flag=_FOLDER)
            except ckpt.CheckpointError as e:
                raise NotLoadedError(str(e)) from e
        gates = {g: ckpt.gate_path(root, g) for g in paths if ckpt.gate_path(root, g).is_file()}
        return cls(paths, gates=gates, device=device, compiler_options=compiler_options, **batching)

    @classmethod
    def from_settings(cls, settings: PlannerServiceSettings) -> Engine:
        """The engine of a service's `settings`: its games' checkpoints on its device, batched
        as they say (`from_dir`)."""
        return cls.from_dir(
            settings.checkpoint_dir,
            game_ids=settings.games or None,
            device=settings.device,
            max_batch=settings.max_batch,
            batch_slots=settings.max_concurrent,
            batch_wait_s=settings.batch_wait_ms / 1000,
            gated_only=settings.gated_only,
            rules={"committed": settings.committed, "tree_k": settings.tree_k},
        )

    # Compilation -------------------------------------------------------------------------------

    def compile(
        self,
        *,
        workers: int | None = None,
        on_ready: Callable[[str], None] | None = None,
        on_start: Callable[[str, int], None] | None = None,
        on_gate_ready: Callable[[str], None] | None = None,
        behind: Callable[[str], None] | None = None,
        behind_nice: int = 19,
    ) -> None:
        """Compiles and warms every game's value and gate decision at batch 1, its options and
        gated options (`CompiledOptions.warm_jobs`) at each of `search_rungs`, and its wire
        codec, one game after another in
        load order: each game serves as soon as its own executables are ready (`ready_games`),
        so the first game listed plans while the others still compile. Within a game with a
        gate, what its gated requests run (`gated_kinds`) compiles first: it plays gated
        (`gate_ready_games`, `on_gate_ready(game_id)`) while its forced budgets still compile.

        Runs each once on the game's first state, so the first real request pays no trace.
        XLA compiles outside the GIL, so `workers` threads (default: up to 4 CPUs) overlap a
        game's executables. `on_start(game_id, executables)` and `on_ready(game_id)` are
        called (on this thread) as each game starts compiling and once it is ready.

        `behind`: the games after the first are compiled behind the first one's searches, at
        a low CPU priority (`lower_priority`): `behind(game_id)` is called before each (it may
        block, e.g. until another process has filled the compile cache with it) and its
        executables then compile on threads of nice `behind_nice`.
        """
        workers = workers or min(4, os.cpu_count() or 1)
        switch = sys.getswitchinterval()
        pool = ThreadPoolExecutor(workers, thread_name_prefix="planner-compile")
        try:
            for i, (game_id, loaded) in enumerate(self._games.items()):
                if i == 1 and behind is not None:
                    pool.shutdown()
                    lower_priority(behind_nice)
                    pool = ThreadPoolExecutor(
                        workers,
                        thread_name_prefix="planner-compile",
                        initializer=lower_priority,
                        initargs=(behind_nice,),
                    )
                if on_start is not None:
                    on_start(game_id, self.executables(game_id))
                if i >= 1 and behind is not None:
                    behind(game_id)
                    # Loading holds the GIL for long stretches (tracing, lowering): the first
                    # game's requests get it back within 0.5 ms instead of Python's 5 ms, a
                    # wait each request pays at every hand-over (measured: 15% fallback frames
                    # in the showcase while a game loaded behind it with the default).
                    sys.setswitchinterval(BEHIND_SWITCH_S)
                # One jitted init compiles faster than its ops one by one.
                state = jax.jit(loaded.planner.game.init)(jax.random.PRNGKey(0))
                # The wire codec traces the game's state layout once: here, not in a request.
                wire.state_to_proto(loaded.planner.game, state)
                state = jax.device_get(state)
                gated = loaded.options.gated_kinds()
                if gated:
                    list(pool.map(self._warm, self._warm_jobs(loaded, state, gated)))
                    self._gate_ready[game_id].set()
                    if on_gate_ready is not None:
                        on_gate_ready(game_id)
                if not self.serves_gated_only(game_id):
                    rest = dict.fromkeys(k for k, _ in loaded.options.kinds() if k not in gated)
                    list(pool.map(self._warm, self._warm_jobs(loaded, state, rest)))
                    self._game_ready[game_id].set()
                if on_ready is not None:
                    on_ready(game_id)
        finally:
            pool.shutdown()
            sys.setswitchinterval(switch)
        self._ready.set()

    def close(self) -> None:
        """Makes a running `compile()` skip the options it has not started (for shutdown)."""
        self._stop.set()

    def _warm_jobs(self, loaded: LoadedGame, state: games.State, kinds) -> list:
        """The warm-ups of `kinds`: decisions at batch 1, searches at each search rung."""
        options = loaded.options
        decisions = [kind for kind in kinds if kind not in SEARCH_KINDS]
        searches = [kind for kind in kinds if kind in SEARCH_KINDS]
        return [
            *options.warm_jobs(state, (1,), kinds=decisions),
            *options.warm_jobs(state, self.search_rungs, kinds=searches),
        ]

    def _warm(self, job) -> None:
        if self._stop.is_set():
            raise NotReadyError("compile stopped: the engine was closed")
        job()
        with self._lock:
            self._compiled += 1

    @property
    def ready(self) -> bool:
        """True once `compile()` has finished: every game serves."""
        return self._ready.is_set()

    @property
    def ready_games(self) -> tuple[str, ...]:
        """The games compiled so far (they serve), in load order."""
        return tuple(g for g, event in self._game_ready.items() if event.is_set())

    @property
    def gate_ready_games(self) -> tuple[str, ...]:
        """The games whose gated requests plan (their gate compiled first), in load order."""
        return tuple(g for g, event in self._gate_ready.items() if event.is_set())

    @property
    def progress(self) -> tuple[int, int]:
        """(executables compiled, in all): every game's value and gate, and its options and a
        gate-tree gate's own options at each search rung."""
        return self._compiled, sum(self.executables(g) for g in self._games)

    def serves_gated_only(self, game_id: str) -> bool:
        """`game_id` serves gated requests only (`gated_only` and it has a gate)."""
        return self.gated_only and self.loaded(game_id).gate is not None

    def executables(self, game_id: str) -> int:
        """The executables `compile()` builds for `game_id` (see `progress`)."""
        options = self.loaded(game_id).options
        gated = options.gated_kinds()
        kinds = [kind for kind, _ in options.kinds()]
        if self.serves_gated_only(game_id):
            kinds = [kind for kind in kinds if kind in gated]
        searches = sum(kind in SEARCH_KINDS for kind in kinds)
        return len(kinds) - searches + searches * len(self.search_rungs)

    @property
    def batch_stats(self) -> BatchStats | None:
        """What the batcher has run (None without batching)."""
        return None if self._batcher is None else self._batcher.stats

    @property
    def gate_ids(self) -> tuple[str, ...]:
        """The served games that have a gate, in load order."""
        return tuple(g for g, loaded in self._games.items() if loaded.gate is not None)

    # Queries -----------------------------------------------------------------------------------

    @property
    def game_ids(self) -> tuple[str, ...]:
        """The served games, in load order."""
        return tuple(self._games)

    def loaded(self, game_id: str) -> LoadedGame:
        """The served game `game_id`.

        Raises:
            games.UnknownGameError: not a registered game.
            NotLoadedError: registered, but no checkpoint of it is loaded here.
        """
        found = self._games.get(game_id)
        if found is None:
            games.game_class(game_id)  # UnknownGameError names the registered games
            served = ", ".join(self._games) or "none"
            raise NotLoadedError(
                f"no planner checkpoint loaded for {game_id}; this server plans for: {served}"
            )
        return found

    def decode_state(self, game_id: str, msg: tensor_pb2.GameState) -> games.State:
        """A validated, unbatched numpy state of `game_id` from its wire form.

        Raises:
            games.UnknownGameError / NotLoadedError: see `loaded`.
            StateError: the `WireError` text (which leaf, what was wrong), a finished game, or a
                running game with no legal action.
        """
        loaded = self.loaded(game_id)
        try:
            state = wire.state_from_proto(loaded.planner.game, msg, host=True)
        except wire.WireError as e:
            raise StateError(str(e)) from None
        if bool(state.done):
            raise StateError(f"state of {game_id} is finished (terminated/truncated): no plan")
        if not np.any(state.legal_action_mask):
            raise StateError(f"state of {game_id} has no legal action")
        return state

    def check(
        self,
        game_id: str,
        budget: int | str,
        gate_state: ClockGateCarry | None = None,
        plan: np.ndarray | None = None,
    ) -> int | str:
        """Validates a game, budget, clock gate state and plan before any work is queued for
        them.

        Returns:
            The budget: a forced k (int) or `GATE`.

        Raises:
            games.UnknownGameError, NotLoadedError, BudgetError, NoGateError, NotReadyError,
            InvalidRequestError (a `gate_state` without a clock gate, or of the wrong shape; a
            plan for a game not played under committed "plan", longer than its plan horizon,
            or with an action out of range).
        """
        loaded = self.loaded(game_id)
        if budget == GATE:
            if loaded.gate is None:
                raise NoGateError(f"no gate checkpoint loaded for {game_id}")
        else:
            budget = _budget(loaded, budget)
        if gate_state is not None:
            _check_gate_state(loaded, budget, gate_state)
        if plan is not None:
            _check_plan(loaded, plan)
        self._serving(game_id, gated=budget == GATE)
        return budget

    def decision(
        self,
        game_id: str,
        state: games.State,
        budget: int | str,
        gate_state: ClockGateCarry | None = None,
        *,
        value: float | None = None,
    ) -> Decision:
        """The budget decision at s_t: k, gate probabilities, value, landing frame (and a clock
        gate's next state).

        Args:
            game_id: a served game.
            state: one unbatched state of it (numpy or jax leaves), s_t.
            budget: a forced k (one of the game's budgets) or `GATE`.
            gate_state: a clock gate's state before this ply (`GATE` only; None: a fresh
                game's, `zero_carry`).
            value: a forced k's value at s_t when the caller has it already (its option's
                `Plan.root_value`): no network call. Ignored with `GATE`.

        Returns:
            The decision. With `GATE`, k is the gate's argmax and `gate_probabilities` its
            distribution over the budgets (`Gate.decide` with no key); a clock gate's is over
            its options, policy-only (k = `POLICY_ONLY`) first (`ClockGate.decide`), with its
            next state in `gate_state`. A forced k has none. The landing frame is where the
            option's planned action applies: `frame + k - 1` in committed games (k - 1 reflex
            frames come first), `frame` in clock games (one move per option).

        Raises:
            NotReadyError, games.UnknownGameError, NotLoadedError, BudgetError, NoGateError,
            InvalidRequestError.
        """
        loaded = self._serving(game_id, gated=budget == GATE)
        budget = self.check(game_id, budget, gate_state)
        states = _batch(state)
        carry = None
        if budget == GATE and loaded.clock_gate:
            k, probabilities, value, carry = _clock_gate(loaded, states, gate_state)
        elif budget == GATE:
            k, probabilities, value = _gate(loaded, states)
        else:
            k, probabilities = int(budget), np.zeros((0,), np.float32)
            value = _value(loaded, states) if value is None else float(value)
        return Decision(
            k=k,
            gate_probabilities=probabilities,
            value=value,
            landing_frame=landing_frame(int(state.frame), k, kind=loaded.planner.kind),
            gate_state=carry,
        )

    def decides_first(self, game_id: str, budget: int | str) -> bool:
        """Whether a request's decision is worth sending before its search: always for `GATE`
        (the client learns k from it), and for a forced k whose action lands after the decision
        frame (k > 1 in a committed game: the client plays k - 1 reflex frames meanwhile). A
        forced k landing on the decision frame itself (k = 1, or any clock game's move) gains
        nothing from it: its decision can take the option's own root value instead of a
        network call (`decision(value=plan.root_value)`)."""
        if budget == GATE:
            return True
        loaded = self.loaded(game_id)
        return landing_frame(0, int(budget), kind=loaded.planner.kind) > 0

    def plan(
        self,
        game_id: str,
        state: games.State,
        k: int,
        seed: int = 0,
        *,
        gated: bool = False,
        deadline: float | None = None,
        abandoned: threading.Event | None = None,
        plan: np.ndarray | None = None,
    ) -> Plan:
        """Runs option k from s_t and returns its planned action and search statistics.

        Args:
            game_id: a served game.
            state: one unbatched state s_t.
            k: one of the game's budgets (from the decision); `POLICY_ONLY` (0) for a clock
                gate's policy-only choice (`gated`): the reflex move, cost 0.
            seed: search PRNG seed, any uint64 (the deterministic search does not use it).
            gated: the option answers a `gate` budget. With a gate-tree gate it then plans
                against the gate's own future, as the gate was trained; otherwise (and always
                for a forced k, and for a clock gate) the tree expects always k.
            deadline: `time.monotonic()` seconds by which the answer is needed: a search that
                its kind's measured search time says cannot end by then is not started.
            abandoned: set once the caller no longer wants the answer: a search not started
                yet never starts.
            plan: a game played under committed "plan": the session's plan `[L]` int32 (the
                previous answer's `Plan.plan`, its first action on s_t's frame), which the
                option's committed frames follow while it is legal (`Planner.option`); None or
                empty: no plan (the reflex).

        Returns:
            The plan. Batched, its `search_ms` is its batch's call. Under committed "plan" its
            `plan` is the next option's.

        Raises:
            NotReadyError, games.UnknownGameError, NotLoadedError, BudgetError, NoGateError
            (`gated` for a game with no gate), NotStartedError (see `deadline`, `abandoned`),
            InvalidRequestError (a bad `plan`, see `check`).
        """
        loaded = self._serving(game_id, gated=gated)
        if gated and loaded.gate is None:
            raise NoGateError(f"no gate checkpoint loaded for {game_id}")
        if gated and loaded.clock_gate and k == POLICY_ONLY:
            return _policy_only(loaded, _batch(state))
        # A clock gate's budgets play the always-k options it was trained over.
        gated = gated and not loaded.clock_gate
        k = _budget(loaded, k)
        if plan is not None:
            plan = np.asarray(plan, np.int32)
            _check_plan(loaded, plan)
        group = (game_id, GATED if gated else OPTION, k)
        if self._batcher is None:
            return self._run_alone(loaded, group, state, seed, deadline, abandoned, plan)
        return self._batcher.run(group, (state, seed, plan), deadline=deadline, abandoned=abandoned)

    def _run_alone(self, loaded, group, state, seed, deadline, abandoned, plan) -> Plan:
        """One unbatched search, unless its caller gave up or its deadline cannot be met (a
        late search would only hold a worker thread that the session's next one needs)."""
        start = time.monotonic()
        why = not_started_why(start, deadline, abandoned, self._search_s.get(group, 0.0))
        if why is not None:
            with self._lock:
                self.not_started += 1
                gone = abandoned is not None and abandoned.is_set()
                if group in self._search_s and not gone:
                    # A dropped search is never timed: let a mean that a slow spell inflated
                    # decay, so the service tries again rather than drop every later search.
                    self._search_s[group] *= 0.8
            raise NotStartedError(why)
        answer = _run_option(loaded, _batch(state), group[2], seed, group[1] == GATED, plan)
        seconds = time.monotonic() - start
        with self._lock:
            # The fast end of recent searches, not their mean: a search is dropped only when
            # even a fast one could not land (a mean just past the window would drop every
            # search, where about half of them land).
            est = self._search_s.get(group)
            fast = seconds if est is None or seconds < est else est + 0.1 * (seconds - est)
            self._search_s[group] = fast
        return answer

    def _run_batch(self, group: tuple[str, str, int], payloads: list) -> list[Plan]:
        """The `Batcher`'s call: one option of `group` for every (state, seed, plan), at the
        next search rung."""
        game_id, kind, k = group
        size = next(r for r in self.search_rungs if r >= len(payloads))
        states = _stack([state for state, _, _ in payloads])
        seeds = [seed for _, seed, _ in payloads]
        plans = [np.zeros(0, np.int32) if plan is None else plan for _, _, plan in payloads]
        loaded = self._games[game_id]
        return _run_options(loaded, states, k, seeds, kind == GATED, plans, size=size)

    # Internals ---------------------------------------------------------------------------------

    def _serving(self, game_id: str, *, gated: bool = False) -> LoadedGame:
        """`loaded(game_id)` once it plans: compiled, or (`gated`) its gate compiled."""
        loaded = self.loaded(game_id)
        if gated and self._gate_ready[game_id].is_set():
            return loaded
        if not gated and self.serves_gated_only(game_id):
            raise GatedOnlyError(
                f"this planner service plans {game_id} gated only (--gated-only): ask for the "
                "gate (budget.gate), or a service that serves its forced budgets"
            )
        if not self._game_ready[game_id].is_set():
            done, total = self.progress
            ready = ", ".join(self.ready_games) or "none yet"
            raise NotReadyError(
                f"the planner for {game_id} is still compiling ({done}/{total} executables "
                f"ready; games ready: {ready})"
            )
        return loaded


#: Python's thread switch interval while games load behind the first (seconds).
BEHIND_SWITCH_S = 0.0005


def lower_priority(nice: int = 19) -> None:
    """Gives the calling thread the nice value `nice` (19: the lowest CPU priority; Linux: nice
    is per thread, and the threads it starts inherit it); elsewhere a no-op. A thread without
    privileges can never raise it back."""
    if not hasattr(os, "setpriority") or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
