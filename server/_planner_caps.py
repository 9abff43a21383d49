"""What the planner services serve (games, budgets, gates), asked over gRPC and kept briefly, and
the one check every planner path of a session (agent, gate, opponent) goes through."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from rtplan import games
from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._planner_route import PlannerRouter
from rtplan.v1 import planner_pb2

#: Seconds the planner service gets to list what it serves.
QUERY_TIMEOUT_S = 10.0
#: Seconds an answer is reused (a restarted planner service is seen after this long); an
#: unreachable service is asked again by the next session's creation.
CACHE_S = 5.0
#: ... or this long while one of its games is still compiling.
COMPILING_CACHE_S = 1.0
#: Seconds a reader that may take an older answer (the game list) waits for a fresh one before
#: it takes the last: a planner service that answers slowly (compiling, at a low priority on a
#: busy machine) never holds the lobby's request up longer.
FRESH_WAIT_S = 0.5

_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


@dataclasses.dataclass(frozen=True)
class ServedGame:
    """One game the planner services plan."""

    budgets: tuple[int, ...]
    gate: bool  # a gate checkpoint is loaded: the planner agent may play without k
    ready: bool = True  # compiled: its forced budgets plan now (a service compiles in turn)
    clock_gate: bool = False  # the gate is a clock game's recurrent gate (state per side)
    gate_ready: bool = False  # its gated requests plan now (its gate compiles first)
    gated_only: bool = False  # no service plans its forced budgets, only its gate
    #: What its options' committed frames play ("reflex" or "plan"; PlannerGame.committed).
    committed: str = "reflex"
    #: Where its gated calls go, and its forced ones (None: the same); where, not what: not
    #: compared.
    address: str | None = dataclasses.field(default=None, compare=False)
    forced_address: str | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def listed(cls, g: planner_pb2.PlannerGame, address: str) -> ServedGame:
        """One service's listing of a game (`ListGames`). A service that predates `gate_ready`
        plans gated requests once the game is compiled; one that predates `committed` plays
        the reflex."""
        ready = not g.compiling and not g.gated_only
        gate_ready = g.gate_ready or (g.gate and not g.compiling)
        return cls(
            tuple(g.budgets),
            g.gate,
            ready,
            g.clock_gate,
            gate_ready,
            g.gated_only,
            g.committed or "reflex",
            address,
        )

    def plans(self, *, gate: bool = False) -> bool:
        """Whether it plans now: compiled, or (`gate`: a gated request) its gate compiled."""
        return self.ready or (gate and self.gate_ready)

    def where(self, *, gate: bool = False) -> str | None:
        """The address its gated (`gate`) or forced calls go to."""
        return self.address if gate else (self.forced_address or self.address)

    @property
    def settled(self) -> bool:
        """Nothing about it changes by compiling any more."""
        return (self.ready or self.gated_only) and (self.gate_ready or not self.gate)


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """The planner services' answers: what they serve, or why nothing can be planned."""

    address: str | None
    games: Mapping[str, ServedGame] = dataclasses.field(default_factory=dict)
    #: Why the service plans nothing: no address configured, or it did not answer (None: it did).
    error: str | None = None
    #: With several services: what each said, in order (address, "serves a, b" or "did not
    #: answer (...)"); empty with one.
    services: tuple[tuple[str, str], ...] = ()
    #: The services that did not answer while others did (their games are missing).
    unanswered: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every service answered."""
        return self.error is None and not self.unanswered

    def refusal(self, game_id: str, *, k: int | None = None, gate: bool = False) -> str | None:
        """Why the planner cannot play `game_id` (at budget `k`, or with its gate), as the
        end of a sentence; None when it can."""
        if self.error is not None:
            return self.error
        served = self.games.get(game_id)
        if served is None and self.services:
            said = "; ".join(f"{address} {what}" for address, what in self.services)
            return f"no planner service serves {game_id} ({said})"
        if served is None:
            have = ", ".join(self.games) or "no game"
            return (
                f"the planner service at {self.address} does not serve {game_id} (it serves {have})"
            )
        at = served.where(gate=gate and k is None) or self.address
        if gate and not served.gate:
            return f"the planner service at {at} has no gate for {game_id}"
        if k is not None and served.gated_only:
            return (
                f"the planner service at {at} plans {game_id} gated only (no service here "
                "plans its forced budgets)"
            )
        if k is not None and k not in served.budgets:
            return (
                f"the planner service at {at} does not plan {game_id} at k={k} "
                f"(its budgets: {list(served.budgets)})"
            )
        # Last: what can never run is said before what will run once compiled.
        if not served.plans(gate=(gate and k is None) or served.gated_only):
            return (
                f"the planner service at {at} is still compiling {game_id} "
                "(it serves each game once compiled; try again shortly)"
            )
        return None

    def describe(self, game_id: str) -> dict[str, Any]:
        """JSON of what the planner service offers for `game_id` (GET /v1/games), per choice.
        Forced budgets: `available` (they plan now), the `budgets` it plans, the `reason` when
        unavailable, and whether they are `compiling` (available soon: the lobby asks again).
        Its gate: `gate` (the gated planner, the agent without k, plays now), `gate_compiling`
        (it will once compiled), `gate_reason` ("" when it plays), whether it is a `clock_gate`
        (a clock game's: the planner agent and the "gate" opponent play it). And what its
        options' `committed` frames play ("plan": a session may follow its plans)."""
        reason = self.refusal(game_id)
        gate_reason = self.refusal(game_id, gate=True)
        served = self.games.get(game_id) if self.error is None else None
        return {
            "available": reason is None,
            # A game no service plans forced (gated only) never becomes available that way.
            "compiling": bool(served and not served.ready and not served.gated_only),
            "budgets": list(served.budgets) if served and reason is None else [],
            "gate": gate_reason is None,
            "gate_compiling": bool(served and served.gate and not served.gate_ready),
            "gate_reason": gate_reason or "",
            "clock_gate": bool(served and served.clock_gate and gate_reason is None),
            "committed": served.committed if served else "reflex",
            "reason": reason or "",
        }

    def instead(
        self, game_id: str, *, gate: bool, k: int | None = None, opponent: bool = False
    ) -> str:
        """What plays `game_id` now in place of a refused planner path (the gate: `gate`, else
        forced `k`; of the agent, or the `opponent`), as the end of a refusal: its gate where it
        plays now, the budgets that plan now (besides `k`), then the reflex. A path that is still
        compiling is never suggested."""
        ways = []
        served = self.games.get(game_id) if self.error is None else None
        if served is not None:
            if not gate and self.refusal(game_id, gate=True) is None:
                gated = "choose opponent 'gate'" if opponent else "leave k out to play its gate"
                ways.append(gated)
            ready = [b for b in served.budgets if b != k and self.refusal(game_id, k=b) is None]
            if ready:
                some = str(ready[0]) if len(ready) == 1 else f"one of {ready}"
                ways.append(
                    f"choose opponent 'planner' with opponent_k {some}"
                    if opponent
                    else f"pass k {some} (a budget it plans now)"
                )
        ways.append("choose opponent 'reflex' or 'random'" if opponent else "choose agent 'reflex'")
        return ", ".join(ways[:-1]) + (" or " if len(ways) > 1 else "") + ways[-1]


def check_session(cfg: SessionConfig, caps: Capabilities, *, kind: games.Kind) -> None:
    """Refuses (409) a session whose planner agent (forced k, k-sequence or gate) or planner
    opponent the planner service cannot play, before it starts.

    Raises:
        SessionError: FAILED_PRECONDITION, one sentence naming what cannot run and why.
    """
    clock = kind is games.Kind.CLOCK
    if cfg.agent == "planner" and cfg.committed == "plan":
        served = caps.games.get(cfg.game_id)
        if served is not None and served.committed != "plan":
            at = served.where(gate=cfg.gated) or caps.address
            raise SessionError(
                _PRECONDITION,
                f"committed 'plan' follows the planner service's plans, but the planner "
                f"service at {at} plays {cfg.game_id} under committed {served.committed!r} "
                "(start it with --committed plan --tree-k 1), or leave committed out",
            )
    if cfg.agent == "planner":
        if cfg.gated:
            why = caps.refusal(cfg.game_id, gate=True)
            if why is not None:
                raise SessionError(
                    _PRECONDITION,
                    f"the planner agent without k plays the gate, but {why}; "
                    + caps.instead(cfg.game_id, gate=True),
                )
        for k in dict.fromkeys(cfg.ks):
            why = caps.refusal(cfg.game_id, k=k)
            if why is not None:
                raise SessionError(
                    _PRECONDITION,
                    f"the planner agent at k={k} cannot play: {why}; "
                    + caps.instead(cfg.game_id, gate=False, k=k),
                )
    if clock and cfg.opponent_gated:
        why = caps.refusal(cfg.game_id, gate=True)
        if why is not None:
            raise SessionError(
                _PRECONDITION,
                f"the gated planner opponent cannot play: {why}; "
                + caps.instead(cfg.game_id, gate=True, opponent=True),
            )
    elif clock and cfg.opponent_plans:
        why = caps.refusal(cfg.game_id, k=cfg.opponent_k)
        if why is not None:
            raise SessionError(
                _PRECONDITION,
                f"the planner opponent at k={cfg.opponent_k} cannot play: {why}; "
                + caps.instead(cfg.game_id, gate=False, k=cfg.opponent_k, opponent=True),
            )


class PlannerCapabilities:
    """Asks the planner services what they serve (`ListGames`), merges their answers and routes
    each game's Plan calls to the service that serves it (`PlannerRouter.route`); keeps a good
    answer `CACHE_S` (`COMPILING_CACHE_S` while a game compiles, none while a service does not
    answer), so its view follows the services' within about a second of being asked.

    `stub`: a `PlannerRouter` over the services, or one service's stub (None: no service).
    A game two services serve has its gated and its forced calls routed apart (`_merged`).
    """

    def __init__(
        self,
        stub,
        address: str | None,
        *,
        cache_s: float = CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if stub is not None and not isinstance(stub, PlannerRouter):
            stub = PlannerRouter([(address, stub)])
        self._stub = stub
        self._address = address
        self._cache_s = cache_s
        self._clock = clock
        self._last: Capabilities | None = None
        self._at = 0.0  # when the question of `_last` was asked
        #: The query asked last while it runs (shared by every reader that needs an answer),
        #: and when it was asked.
        self._asking: asyncio.Future | None = None
        self._asking_at = 0.0

    def _fresh(self, *, deciding: bool) -> bool:
        """`_last` may be reused: recent, complete, and (while a game compiles) a second old
        at most and not `deciding`."""
        if self._last is None or not self._last.complete:
            return False
        age = self._clock() - self._at
        if all(g.settled for g in self._last.games.values()):
            return age < self._cache_s
        return age < min(COMPILING_CACHE_S, self._cache_s) and not deciding

    def _query(self, *, since: float | None = None) -> asyncio.Future:
        """The query in flight if it was asked at or after `since` (None: any), else a new
        one; its answer becomes `_last` unless a later question's answer came first."""
        running = self._asking is not None and not self._asking.done()
        if running and (since is None or self._asking_at >= since):
            return self._asking
        at = self._clock()

        async def ask() -> Capabilities:
            answer = await self._ask()
            if at >= self._at or self._last is None:
                self._last, self._at = answer, at
            return answer

        task = asyncio.ensure_future(ask())
        # A reader that stopped waiting leaves the query running; its error is not lost.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self._asking, self._asking_at = task, at
        return task

    async def get(self, *, deciding: bool = False) -> Capabilities:
        """What the services serve now: a recent answer, else asks them. `deciding`: the
        answer decides a session (its creation, its default opponent), so it comes from a
        question asked after this call whenever a game was still compiling (the demo starts its
        session the moment the planner service says it is ready). Otherwise (the game list) a
        slow answer is waited for `FRESH_WAIT_S` at most, then the last one is taken while the
        question runs on: no reader is held up by a service that answers slowly."""
        if self._stub is None:
            return Capabilities(
                self._address,
                error="this server has no planner_address (RTPLAN_SERVER_PLANNER_ADDRESS)",
            )
        if self._fresh(deciding=deciding):
            return self._last
        if deciding or self._last is None:
            # Shielded: a request that goes away does not cancel the others' question.
            return await asyncio.shield(self._query(since=self._clock() if deciding else None))
        await asyncio.wait({self._query()}, timeout=FRESH_WAIT_S)
        return self._last

    async def _ask(self) -> Capabilities:
        listed: dict[str, list[ServedGame]] = {}
        said, errors, unanswered = [], [], []
        for address, reply in await self._stub.list_games(QUERY_TIMEOUT_S):
            if isinstance(reply, grpc.aio.AioRpcError):
                why = f"did not answer ({reply.code().name}: {reply.details()})"
                said.append((address, why))
                errors.append(f"the planner service at {address} {why}")
                unanswered.append(address)
                continue
            for g in reply.games:
                listed.setdefault(g.game_id, []).append(ServedGame.listed(g, address))
            said.append((address, f"serves {', '.join(g.game_id for g in reply.games) or 'none'}"))
        served = {game_id: _merged(entries) for game_id, entries in listed.items()}
        routes = {}
        for game_id, g in served.items():
            routes[game_id, True], routes[game_id, False] = g.where(gate=True), g.where()
        self._stub.route(routes)
        several = tuple(said) if len(said) > 1 else ()
        if len(errors) == len(said):
            return Capabilities(self._address, error="; ".join(errors))
        return Capabilities(self._address, served, services=several, unanswered=tuple(unanswered))


def _merged(entries: list[ServedGame]) -> ServedGame:
    """One game as several services list it (in the order they are named): its gated calls go
    to the first whose gate plans now (else the first with a gate), its forced calls to the
    first that plans its forced budgets now (else the first that serves them). Its committed
    frames follow plans only where every service plays it under "plan" (a session's calls may
    go to any of them)."""
    gated = [e for e in entries if e.gate]
    forced = [e for e in entries if not e.gated_only]
    gate = next((e for e in gated if e.gate_ready), gated[0] if gated else None)
    plain = next((e for e in forced if e.ready), forced[0] if forced else None)
    base = plain or gate
    return ServedGame(
        budgets=base.budgets,
        gate=gate is not None,
        ready=plain is not None and plain.ready,
        clock_gate=(gate or base).clock_gate,
        gate_ready=gate is not None and gate.gate_ready,
        gated_only=plain is None,
        committed="plan" if all(e.committed == "plan" for e in entries) else "reflex",
        address=(gate or base).address,
        forced_address=base.address,
    )
