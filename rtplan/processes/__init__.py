"""Service processes: the services as subprocesses, REST calls, and the API keys they check."""

from rtplan.processes._children import ROOT, Child, service_cwd, stop_all
from rtplan.processes._http import HTTPStatusError, http_json
from rtplan.processes._keys import (
    ApiKeys,
    KeyFileError,
    Verdict,
    check_key,
    exposure_refusal,
    exposure_warning,
    first_key,
    is_loopback,
    read_key_file,
)
from rtplan.processes._placement import Place, Placement, place_services, visible_gpus
from rtplan.processes._services import bind_error, services
from rtplan.processes._signals import STOP_DEADLINE_S, Stopping, exit_with_parent, stop_on_signals

__all__ = [
    "ROOT",
    "ApiKeys",
    "Child",
    "HTTPStatusError",
    "KeyFileError",
    "Place",
    "Placement",
    "Verdict",
    "bind_error",
    "check_key",
    "exposure_refusal",
    "exposure_warning",
    "exit_with_parent",
    "first_key",
    "http_json",
    "is_loopback",
    "place_services",
    "read_key_file",
    "service_cwd",
    "services",
    "STOP_DEADLINE_S",
    "Stopping",
    "stop_all",
    "stop_on_signals",
    "visible_gpus",
]
