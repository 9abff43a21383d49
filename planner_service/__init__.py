"""gRPC Planner service: gated MCTS as a service, one precompiled search per budget k."""

from rtplan.planner_service.background import BackgroundService
from rtplan.planner_service.engine import (
    GATE,
    Decision,
    Engine,
    EngineError,
    GateLoadError,
    Plan,
    resolve_device,
)
from rtplan.planner_service.server import create_server, serve
from rtplan.planner_service.settings import PlannerServiceSettings

__all__ = [
    "BackgroundService",
    "GATE",
    "Decision",
    "Engine",
    "EngineError",
    "GateLoadError",
    "Plan",
    "PlannerServiceSettings",
    "create_server",
    "resolve_device",
    "serve",
]
