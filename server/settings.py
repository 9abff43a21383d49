"""Environment-server settings, read once from RTPLAN_SERVER_* environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Settings of one env server; keyword arguments override the environment."""

    model_config = SettingsConfigDict(env_prefix="RTPLAN_SERVER_", frozen=True)

    #: Interface both servers bind.
    host: str = "127.0.0.1"
    #: REST + websocket port (0: any free port).
    http_port: int = Field(8000, ge=0, le=65535)
    #: gRPC Env API port (0: any free port).
    grpc_port: int = Field(50052, ge=0, le=65535)
    #: host:port of the Planner service; None disables the planner agent.
    planner_address: str | None = None
    #: Folder with <game>/planner.msgpack checkpoints (the reflex and the planner agent).
    checkpoint_dir: Path = Path("checkpoints")
    #: Frames per second of a session that does not ask for a rate.
    default_fps: float = Field(9.0, gt=0, le=1000)
    #: Highest frame rate a session may ask for.
    max_fps: float = Field(240.0, gt=0, le=10000)
    #: Sessions that may be live (waiting or running) at once.
    max_sessions: int = Field(16, ge=0)
    #: When set, creating a session (REST `Authorization: Bearer` or gRPC Join.token) needs it.
    agent_token: SecretStr | None = None
    #: Where replay files are written.
    record_dir: Path = Path("replays")
    #: Frames a viewer's queue holds before its oldest frames are dropped (>= 2).
    viewer_queue: int = Field(32, ge=2, le=100_000)
    #: Messages an agent stream's queue holds before its oldest messages are dropped.
    agent_queue: int = Field(256, ge=2, le=100_000)
    #: A tick more than this late (ms) counts as a late tick.
    late_tick_ms: float = Field(5.0, ge=0)
    #: Simulated-clock mode: how long a Plan request may take before it counts as an error.
    plan_timeout_s: float = Field(30.0, gt=0)
    #: Clock games in real time: clock ticks per frame period (one tick = period / this).
    clock_ticks_per_frame: int = Field(32, ge=1)
    #: Finished sessions kept for GET /v1/sessions before the oldest are forgotten.
    keep_finished: int = Field(64, ge=0)
    #: Games whose runtime is compiled at start-up (others compile on first use).
    preload: tuple[str, ...] = ()
    #: Seconds the gRPC server gives open calls at shutdown.
    grace_s: float = Field(1.0, ge=0)
