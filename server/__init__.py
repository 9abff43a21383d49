"""The environment server: live real-time sessions over REST, websockets and the gRPC Env API."""

from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._stats import SessionStats
from rtplan.server.app import create_app
from rtplan.server.replay import ReplayError, ReplayFile, ReplayResult, replay
from rtplan.server.session import Session
from rtplan.server.settings import Settings

__all__ = [
    "ReplayError",
    "ReplayFile",
    "ReplayResult",
    "Session",
    "SessionConfig",
    "SessionError",
    "SessionStats",
    "Settings",
    "create_app",
    "replay",
]
