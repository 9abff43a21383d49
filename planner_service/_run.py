"""One request's work on a served game, at batch 1: checks, value, gate choices and options."""

from __future__ import annotations

import time

import jax
import numpy as np

from rtplan import games
from rtplan.gate.clock.gate import ClockGateCarry
from rtplan.gate.clock.network import NO_OPTION
from rtplan.planner_service._answers import GATE, POLICY_ONLY, Plan
from rtplan.planner_service._errors import BudgetError, InvalidRequestError
from rtplan.planner_service._loading import LoadedGame


def _budget(loaded: LoadedGame, k) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k not in loaded.budgets:
        budgets = ", ".join(map(str, loaded.budgets))
        raise BudgetError(f"k={k} is not a budget of {loaded.game_id}; budgets: {budgets}")
    return int(k)


def _batch(state: games.State) -> games.State:
    # Host arrays: the compiled executable moves them to its device in one C++ call, far
    # cheaper than a Python-level device_put per leaf (~0.5 ms for a Snake state).
    return jax.tree.map(lambda x: np.asarray(x)[None], state)


def _value(loaded: LoadedGame, states: games.State) -> float:
    return float(loaded.options.evaluate(states).value[0])


def _gate(loaded: LoadedGame, states: games.State) -> tuple[int, np.ndarray, float]:
    """(k, probabilities [K], planner value) of the gate at one state."""
    choice = loaded.options.decide(states)
    return int(choice.k[0]), choice.probabilities[0].astype(np.float32), float(choice.value[0])


def _check_plan(loaded: LoadedGame, plan: np.ndarray) -> None:
    """A request's plan (`[L]` int32, its first action for the decision frame): none unless
    the game plays under committed "plan", at most its plan horizon, each a game action."""
    if not len(plan):
        return
    cfg = loaded.config
    if cfg.committed != "plan":
        raise InvalidRequestError(
            f"plan is followed under committed plan only, and this service plays "
            f"{loaded.game_id} under committed {cfg.committed}: leave plan out"
        )
    if len(plan) > cfg.plan_horizon:
        raise InvalidRequestError(
            f"plan has {len(plan)} actions; a plan of {loaded.game_id} holds at most "
            f"{cfg.plan_horizon} (its plan_horizon)"
        )
    actions = loaded.planner.game.num_actions
    bad = np.flatnonzero((plan < 0) | (plan >= actions))
    if len(bad):
        i = int(bad[0])
        raise InvalidRequestError(
            f"plan[{i}] is {int(plan[i])}; the actions of {loaded.game_id} are 0..{actions - 1}"
        )


def _plans(loaded: LoadedGame, plans: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """`Planner.option`'s (plan `[n, H]` int32, -1 past each length; plan_len `[n]`) of
    checked request plans."""
    horizon = loaded.config.plan_horizon
    out = np.full((len(plans), horizon), -1, np.int32)
    for i, plan in enumerate(plans):
        out[i, : len(plan)] = plan
    return out, np.array([len(p) for p in plans], np.int32)


def _check_gate_state(loaded: LoadedGame, budget, gate_state: ClockGateCarry) -> None:
    if budget != GATE:
        raise InvalidRequestError(
            f"gate_state goes with budget.gate; a forced k={budget} has no gate state"
        )
    if not loaded.clock_gate:
        raise InvalidRequestError(
            f"gate_state is a clock gate's state, and {loaded.game_id} has no clock gate "
            "(its gate keeps no state): leave gate_state out"
        )
    hidden, n = loaded.gate.config.hidden, loaded.gate.num_options
    h = np.asarray(gate_state.h)
    if h.shape != (hidden,) or h.dtype != np.float32:
        raise InvalidRequestError(
            f"gate_state.h is {h.dtype}{list(h.shape)}; the clock gate of {loaded.game_id} "
            f"keeps float32[{hidden}]"
        )
    if not np.all(np.isfinite(h)):
        raise InvalidRequestError("gate_state.h holds a NaN or an infinity")
    last = int(gate_state.last)
    if not NO_OPTION <= last < n:
        raise InvalidRequestError(
            f"gate_state.last is {last}; the clock gate of {loaded.game_id} has options "
            f"0..{n - 1} ({NO_OPTION}: none yet)"
        )


def _clock_gate(loaded: LoadedGame, states: games.State, gate_state):
    """(k, probabilities [n], planner value, next state) of the clock gate at one state."""
    options = loaded.options
    carry = options.zero_carry() if gate_state is None else gate_state
    batched = ClockGateCarry(
        h=np.asarray(carry.h, np.float32)[None], last=np.asarray([carry.last], np.int32)
    )
    choice = options.decide(batched, states)
    option = int(choice.option[0])
    k = POLICY_ONLY if option == 0 else int(loaded.budgets[option - 1])
    nxt = ClockGateCarry(h=choice.carry.h[0], last=int(choice.carry.last[0]))
    return k, choice.probabilities[0].astype(np.float32), float(choice.value[0]), nxt


def _policy_only(loaded: LoadedGame, states: games.State) -> Plan:
    """A clock gate's policy-only option: the reflex move (the raw policy's masked argmax),
    free, no search."""
    start = time.perf_counter()
    ev = loaded.options.evaluate(states)
    search_ms = (time.perf_counter() - start) * 1e3
    action = int(ev.reflex[0])
    actions = len(states.legal_action_mask[0])
    return Plan(
        action=action,
        frame_actions=np.array([action], np.int32),
        planned=np.zeros(1, bool),
        visit_counts=np.zeros(actions, np.int32),
        search_value=float(ev.value[0]),
        root_value=float(ev.value[0]),
        cost=0,
        search_ms=search_ms,
    )


def _run_option(
    loaded: LoadedGame,
    states: games.State,
    k: int,
    seed: int,
    gated: bool = False,
    plan: np.ndarray | None = None,
) -> Plan:
    """Option k from one state `[1]` at batch 1 (following `plan`, see `_run_options`)."""
    return _run_options(loaded, states, k, [seed], gated, None if plan is None else [plan])[0]


def _run_options(
    loaded: LoadedGame,
    states: games.State,
    k: int,
    seeds: list[int],
    gated: bool = False,
    plans: list[np.ndarray] | None = None,
    *,
    size: int | None = None,
) -> list[Plan]:
    """Option k from `[n]` states, each with its own seed (and, under committed "plan", its
    checked plan `[L]` int32; None: none), in one call (padded with copies of row 0 to `size`
    rows when given, else to the options' next rung); one `Plan` per row, each with the call's
    time as its `search_ms`."""
    # A uint64 seed is exactly one threefry key (two uint32 words).
    keys = np.array([[(s >> 32) & 0xFFFFFFFF, s & 0xFFFFFFFF] for s in seeds], np.uint32)
    n = len(seeds)
    by_plan = loaded.config.committed == "plan"
    plan = _plans(loaded, plans or [np.zeros(0, np.int32)] * n) if by_plan else None
    if size is not None and size > n:
        keys, states, plan = jax.tree.map(lambda x: _pad(x, size), (keys, states, plan))
    start = time.perf_counter()
    if gated:
        out = loaded.options.gated_option(k, keys, states, plan)
    else:
        out = loaded.options.option(k, keys, states, plan)
    search_ms = (time.perf_counter() - start) * 1e3
    return [
        Plan(
            action=int(out.actions[i, -1]),
            frame_actions=out.actions[i].astype(np.int32),
            planned=out.planned[i].astype(bool),
            visit_counts=out.visit_counts[i].astype(np.int32),
            search_value=float(out.search_value[i]),
            root_value=float(out.root_value[i]),
            cost=int(out.cost[i]),
            search_ms=search_ms,
            **({"plan": out.plan[i, : out.plan_len[i]].astype(np.int32)} if by_plan else {}),
        )
        for i in range(n)
    ]


def _stack(states: list[games.State]) -> games.State:
    """`[n]` host states from n unbatched ones."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states)


def _pad(x, size: int) -> np.ndarray:
    """`x` `[n, ...]` padded to `[size, ...]` with copies of its row 0: a copy computes what
    row 0 does (same key, same state)."""
    x = np.asarray(x)
    return np.concatenate([x, np.repeat(x[:1], size - x.shape[0], 0)])
