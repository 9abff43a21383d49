"""The env server's planner services, one channel each, with each game's Plan calls sent to the
service that serves it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import grpc

from rtplan.server._planner_channel import open_channel, planner_services
from rtplan.v1 import planner_pb2, planner_pb2_grpc


class PlannerRouter:
    """Stands in for a `PlannerStub` where a session plans (`Plan`): each call goes to the
    planner service that serves its game, by the services' last `ListGames` answers
    (`list_games`, which `server._planner_caps.PlannerCapabilities` asks). Replicas of one
    service share its channel, balanced there (`open_channel`).

    One service gets every call, as a bare stub would. With several, a game none of them
    listed goes to the first (it answers FAILED_PRECONDITION naming the games it serves);
    sessions are refused before that with the services' answers (`Capabilities.refusal`).
    """

    def __init__(self, services: Sequence[tuple[str, object]]) -> None:
        """`services`: (address, stub) per planner service, in the order they were named."""
        if not services:
            raise ValueError("a planner router needs at least one service")
        self.services = tuple(services)
        self._stubs = dict(self.services)
        self._routes: dict[tuple[str, bool], str] = {}

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(address for address, _ in self.services)

    def route(self, routes: Mapping[tuple[str, bool], str]) -> None:
        """Sends calls to a service from now on: (game id, gated) -> its address. A game's gated
        and forced calls may go to different services (the demo's showcase plays gated in a
        service of its own, which never compiles its forced budgets)."""
        self._routes = dict(routes)

    def address_of(self, game_id: str, *, gated: bool = False) -> str:
        """The address of the service that gets `game_id`'s gated (`gated`) or forced calls."""
        return self._routes.get((game_id, gated), self.services[0][0])

    def Plan(self, request: planner_pb2.PlanRequest, **kwargs):  # noqa: N802 (the stub's name)
        """The Plan call of the service that serves `request.game_id` at its budget (a
        `PlannerStub.Plan`)."""
        gated = request.budget.WhichOneof("budget") == "gate"
        return self._stubs[self.address_of(request.game_id, gated=gated)].Plan(request, **kwargs)

    async def list_games(
        self, timeout: float
    ) -> list[tuple[str, planner_pb2.ListPlannerGamesResponse | grpc.aio.AioRpcError]]:
        """Every service's ListGames answer (or its error), asked at once, in service order."""
        request = planner_pb2.ListPlannerGamesRequest()

        async def ask(stub):
            try:
                return await stub.ListGames(request, timeout=timeout)
            except grpc.aio.AioRpcError as e:
                return e

        answers = await asyncio.gather(*(ask(stub) for _, stub in self.services))
        return list(zip(self.addresses, answers, strict=True))


def open_router(address: str) -> tuple[PlannerRouter, list[grpc.aio.Channel]]:
    """A router over the planner services of an address setting (`planner_services`), with
    the channels it opened (close them at shutdown)."""
    channels = [open_channel(service) for service in planner_services(address)]
    stubs = [planner_pb2_grpc.PlannerStub(channel) for channel in channels]
    return PlannerRouter(list(zip(planner_services(address), stubs, strict=True))), channels
