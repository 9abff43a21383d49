"""Planner-service settings, read once from RTPLAN_PLANNER_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class PlannerServiceSettings(BaseSettings):
    """Settings of one planner service; keyword arguments override the environment."""

    model_config = SettingsConfigDict(env_prefix="RTPLAN_PLANNER_", frozen=True)

    #: Interface to bind.
    host: str = "127.0.0.1"
    #: gRPC port (0: any free port).
    port: int = Field(50051, ge=0, le=65535)
    #: Where searches run: cpu, cpu:N, cuda or cuda:N.
    device: str = "cpu"
    #: Folder with one <game>/planner.msgpack per game (and <game>/gate.msgpack where gated).
    checkpoint_dir: Path = Path("checkpoints")
    #: Games to serve (comma-separated in the environment); empty: every game with a checkpoint.
    games: Annotated[tuple[str, ...], NoDecode] = ()
    #: Searches that may run at once; past it a Plan gets RESOURCE_EXHAUSTED with a retry hint.
    max_concurrent: int = Field(2, ge=1, le=1024)
    #: Seconds open calls get to finish at shutdown.
    grace_s: float = Field(2.0, ge=0)

    @field_validator("games", mode="before")
    @classmethod
    def _split_games(cls, value):
        if isinstance(value, str):
            return tuple(g.strip() for g in value.split(",") if g.strip())
        return value
