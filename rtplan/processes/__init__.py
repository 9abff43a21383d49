"""Service processes: the planner service and the env server started as subprocesses, and REST."""

from rtplan.processes._children import ROOT, Child, service_cwd, stop_all
from rtplan.processes._http import HTTPStatusError, http_json
from rtplan.processes._placement import Place, Placement, place_services, visible_gpus
from rtplan.processes._services import bind_error, services
from rtplan.processes._signals import STOP_DEADLINE_S, Stopping, exit_with_parent, stop_on_signals

__all__ = [
    "ROOT",
    "Child",
    "HTTPStatusError",
    "Place",
    "Placement",
    "bind_error",
    "exit_with_parent",
    "http_json",
    "place_services",
    "service_cwd",
    "services",
    "STOP_DEADLINE_S",
    "Stopping",
    "stop_all",
    "stop_on_signals",
    "visible_gpus",
]
