"""The environment server: live real-time sessions over REST, websockets and the gRPC Env API."""

from server._config import SessionConfig, SessionError
from server._stats import SessionStats
from server.app import create_app
from server.replay import ReplayError, ReplayFile, ReplayResult, replay
from server.session import Session
from server.settings import Settings

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
