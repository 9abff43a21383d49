"""The FastAPI dependencies the env server's routers share: what create_app and its lifespan put
on `app.state`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from rtplan.processes import ApiKeys
from rtplan.server._manager import SessionManager
from rtplan.server._runtime import Runtimes
from rtplan.server.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_manager(request: Request) -> SessionManager:
    return request.app.state.manager


def get_runtimes(request: Request) -> Runtimes:
    return request.app.state.runtimes


def get_grpc_port(request: Request) -> int:
    return request.app.state.grpc_port


def get_keys(request: Request) -> ApiKeys:
    return request.app.state.keys


AppSettings = Annotated[Settings, Depends(get_settings)]
Manager = Annotated[SessionManager, Depends(get_manager)]
GameRuntimes = Annotated[Runtimes, Depends(get_runtimes)]
GrpcPort = Annotated[int, Depends(get_grpc_port)]
Keys = Annotated[ApiKeys, Depends(get_keys)]
Authorization = Annotated[str | None, Header(max_length=1000)]
