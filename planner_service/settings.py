"""Planner-service settings, read once from RTPLAN_PLANNER_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from rtplan.harness.checkpoint import checkpoint_root


class PlannerServiceSettings(BaseSettings):
    """Settings of one planner service; keyword arguments override the environment.

    Each field's description and default are also its `rtplan planner-service --help` text
    (`harness.config.add_settings_flags`).
    """

    model_config = SettingsConfigDict(env_prefix="RTPLAN_PLANNER_", frozen=True)

    host: str = Field("127.0.0.1", description="interface to bind")
    port: int = Field(50051, ge=0, le=65535, description="gRPC port, 0: any free")
    device: str = Field("cpu", description="where searches run: cpu, cpu:N, cuda or cuda:N")
    checkpoint_dir: Path = Field(
        default_factory=checkpoint_root,
        description="folder of <game>/planner.msgpack, and <game>/gate.msgpack where a game "
        "has a gate",
    )
    games: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="games to serve (comma-separated in the environment); none: every game "
        "with a checkpoint",
    )
    max_concurrent: int = Field(
        2,
        ge=1,
        le=1024,
        description="searches that may run at once (batched searches, each of up to max-batch "
        "requests); past that many requests a Plan gets RESOURCE_EXHAUSTED with a retry hint",
    )
    max_batch: int = Field(
        1,
        ge=1,
        le=64,
        description="most requests one batched search holds: searches of one game, kind and k "
        "that wait together run as one call at a batch of 2, 4, 8, ... up to this (one "
        "executable per k and size, all compiled at start: 8 compiles three per k where 1 "
        "compiles one); 1 (the default): every search alone at batch 1. Many sessions on one "
        "service: 8 (docs/services.md)",
    )
    stream_searches: int = Field(
        2,
        ge=1,
        le=16,
        description="searches one stream (a session's planner) may run at once: a search that "
        "outlasts its landing frame runs on beside the session's next one instead of delaying "
        "it; 1: one at a time",
    )
    batch_wait_ms: float = Field(
        2.0,
        ge=0,
        le=1000,
        description="longest a search waits for others to join its batch while a slot is free "
        "(less when its deadline needs the time)",
    )
    background_nice: int | None = Field(
        None,
        ge=1,
        le=19,
        description="compile the games after the first behind it: a child process at this "
        "nice value (19: the lowest CPU priority) fills the compile cache with them and this "
        "service then loads each from there on a thread of the same priority, so their "
        "compiles never slow the first game's searches (the demo's choice: 19); needs the "
        "compile cache; unset: each game compiles here in turn, at full priority",
    )
    gated_only: bool = Field(
        False,
        description="serve only gated requests of the games that have a gate: compile their "
        "gate and the options it plays, never their forced budgets (a forced k is refused; "
        "another service serves it: the demo's showcase service)",
    )
    committed: str | None = Field(
        None,
        pattern="^(reflex|plan)$",
        description="what the k-1 committed frames of the committed-action games' options play: "
        "reflex (the paper's) or plan (the previous option's plan, which each request then "
        "carries and each action returns; needs a tree-k of 1 or more); unset: each "
        "checkpoint's own (clock games always keep theirs)",
    )
    tree_k: int | None = Field(
        None,
        ge=0,
        description="frames of every edge below the search's root in the committed-action "
        "games (0: the option's own k, the always-k tree); unset: each checkpoint's own",
    )
    grace_s: float = Field(2.0, ge=0, description="seconds open calls get to finish at shutdown")
    max_connection_age_s: float = Field(
        60.0,
        gt=0,
        description="seconds a client connection lives before the service asks the client to "
        "reconnect (its open calls get 30 s more to finish): clients then resolve the planner "
        "name again and spread their calls over replicas started since",
    )

    @field_validator("games", mode="before")
    @classmethod
    def _split_games(cls, value):
        # "a,b" from the environment or one flag value; ("a", "b") from `--games a b`.
        if isinstance(value, str):
            value = (value,)
        if isinstance(value, list | tuple):
            return tuple(g.strip() for v in value for g in str(v).split(",") if g.strip())
        return value
