"""Environment-server settings, read once from RTPLAN_SERVER_* environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rtplan.harness.checkpoint import checkpoint_root
from rtplan.harness.layout import replays_root, results_root
from rtplan.processes import check_key
from rtplan.server._planner_channel import planner_services


class Settings(BaseSettings):
    """Settings of one env server; keyword arguments override the environment.

    Each field's description and default are also its `rtplan env-server --help` text
    (`harness.config.add_settings_flags`).
    """

    # An error never shows the value it refused: the agent token's would be a secret.
    model_config = SettingsConfigDict(
        env_prefix="RTPLAN_SERVER_", frozen=True, hide_input_in_errors=True
    )

    host: str = Field(
        "127.0.0.1",
        description="interface both servers bind; one that is not loopback needs a key "
        "(--api-key-file, RTPLAN_SERVER_AGENT_TOKEN) or --open",
    )
    http_port: int = Field(8000, ge=0, le=65535, description="REST + websocket port, 0: any free")
    grpc_port: int = Field(50052, ge=0, le=65535, description="gRPC Env API port, 0: any free")
    planner_address: str | None = Field(
        None,
        description="the Planner service: HOST:PORT, or its replicas as IP:PORT,IP:PORT,... "
        "or dns:///NAME:PORT (a name that resolves to each, e.g. a Kubernetes headless "
        "Service), calls balanced round robin; several services that serve different games "
        "separated by ';' (each game's calls go to the service that serves it); unset "
        "disables the planner agent",
    )
    checkpoint_dir: Path = Field(
        default_factory=checkpoint_root,
        description="folder of <game>/planner.msgpack: the reflex's and the planner agent's",
    )
    default_fps: float = Field(
        9.0, gt=0, le=1000, description="frames per second of a session that asks for no rate"
    )
    max_fps: float = Field(
        240.0, gt=0, le=10000, description="highest frame rate a session may ask for"
    )
    max_sessions: int = Field(
        16, ge=0, description="sessions that may be live (waiting or running) at once"
    )
    agent_token: SecretStr | None = Field(
        None,
        description="a key: when set, creating a session needs it or a key of the API key "
        "file (REST `Authorization: Bearer`, gRPC Join.token); >= 16 visible ASCII characters",
    )
    api_key_file: Path | None = Field(
        None,
        description="a file of keys, one a line (# comments), any of which creates sessions as "
        "the agent token does; read again when it changes, so keys rotate without a restart",
    )
    open: bool = Field(
        False,
        description="serve a host that is not loopback with no key, on purpose: anyone who "
        "reaches the ports can create sessions (without it the server refuses to start)",
    )
    record_dir: Path = Field(
        default_factory=replays_root,
        description="where replay files are written (default: the checkout's replays/, else "
        "$XDG_DATA_HOME/rtplan/replays, ~/.local/share/rtplan/replays when unset)",
    )
    replay_keep: int = Field(
        1000,
        ge=0,
        description="replay files the record folder keeps (the newest; older ones are deleted "
        "when a recording starts and at start-up); 0: no limit",
    )
    replay_max_age_days: float = Field(
        30.0, ge=0, description="replay files older than this many days are deleted; 0: no limit"
    )
    results_dir: Path = Field(
        default_factory=results_root,
        description="the measured results (results/<game>/<topic>/: calibration, cross-eval, "
        "training logs, `rtplan report`'s figures) the results page lists",
    )
    viewer_queue: int = Field(
        32,
        ge=2,
        le=100_000,
        description="frames a viewer's queue holds before it drops the oldest (>= 2)",
    )
    agent_queue: int = Field(
        256,
        ge=2,
        le=100_000,
        description="messages an agent stream's queue holds before it drops the oldest",
    )
    batch_ticks: bool = Field(
        True,
        description="step the real-time single-player sessions of one game and frame rate "
        "together, one batched step per tick: what holds hundreds of sessions a server "
        "(bench/bench_sessions.py); off: each session ticks alone",
    )
    batch_warm_rows: int = Field(
        8,
        ge=1,
        description="batched ticks: the batch sizes up to this many rows compile when a game "
        "loads (seconds each), larger ones in the background once a group is half full (its "
        "sessions ticking on, a little slower); set it to the sessions expected at once to "
        "keep their arrival free of compiles",
    )
    late_tick_ms: float = Field(5.0, ge=0, description="a tick this many ms late counts as late")
    plan_timeout_s: float = Field(
        30.0, gt=0, description="simulated clock: seconds a Plan request may take"
    )
    clock_ticks_per_frame: int = Field(
        32, ge=1, description="clock games in real time: clock ticks per frame period"
    )
    human_countdown_s: float = Field(
        3.0,
        ge=0,
        le=60,
        description="seconds of countdown between a person's page joining and frame 0's clock",
    )
    tv_turn_s: float = Field(
        60.0,
        gt=0,
        description="seconds /tv shows a live game before the next live one has its turn (a "
        "game that ends sooner hands over then)",
    )
    keep_finished: int = Field(
        64, ge=0, description="finished sessions GET /v1/sessions keeps before forgetting them"
    )
    preload: tuple[str, ...] = Field(
        (),
        description="games compiled at start-up, while the server already answers (others "
        "compile on first use)",
    )
    grace_s: float = Field(1.0, ge=0, description="seconds open gRPC calls get at shutdown")
    web_dir: Path | None = Field(
        None,
        description="folder of the browser pages served at / (default: the checkout's web/ "
        "beside the packages, else the installed package's copy)",
    )
    arena_url: str | None = Field(
        None,
        description="an arena's address (http://HOST:PORT), which the lobby links to (its "
        "leaderboard, /arena); unset: no link",
    )

    @field_validator("agent_token")
    @classmethod
    def _check_agent_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_key(value.get_secret_value(), "the agent token")
        return value

    @field_validator("arena_url")
    @classmethod
    def _check_arena_url(cls, value: str | None) -> str | None:
        # A page puts it in a link: an http(s) address or nothing (blank: unset).
        if value is None or not value.strip():
            return None
        if not value.strip().startswith(("http://", "https://")):
            raise ValueError("an arena's address starts http:// or https://")
        return value.strip().rstrip("/")

    @field_validator("planner_address")
    @classmethod
    def _check_planner_address(cls, value: str | None) -> str | None:
        # Blank is unset (an empty variable); anything else must make a gRPC target now, at
        # start-up, rather than fail the first session that plans.
        if value is None or not value.strip():
            return None
        planner_services(value)
        return value.strip()
