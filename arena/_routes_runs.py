"""The runs router: enter a ranked run, take its episodes one by one, read or abandon it."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from rtplan.arena import identity, ranked, standings
from rtplan.arena._deps import Limits, Registry, RunBook, Token
from rtplan.arena._errors import ArenaError, responses
from rtplan.arena._limits import RateLimits
from rtplan.arena.agents import Agents
from rtplan.arena.identity import NAME_LEN, NAME_PATTERN
from rtplan.arena.records import TIMING, EpisodeRecord, RunRecord, VersionRecord
from rtplan.arena.runs import Assignment
from rtplan.harness.stats import standard_error

router = APIRouter(tags=["runs"])

RunId = Annotated[int, Path(ge=1, le=2**31 - 1, description="a run's id")]
TierName = Literal["standard", "fast"]
#: A ranked game: the document lists them (an enum); the server answers any other string with
#: its own error, `unknown_game`.
RANKED_GAME = dict(
    min_length=1,
    max_length=64,
    description="a ranked game: " + ", ".join(ranked.GAMES),
    json_schema_extra={"enum": list(ranked.GAMES)},
)
RankedGame = Annotated[str, Field(**RANKED_GAME)]
#: The kinds any call with an agent's token can answer.
_AUTH = ("token_required", "wrong_token", "revoked_token")


class EnterRun(BaseModel):
    """Body of POST /v1/runs."""

    model_config = ConfigDict(extra="forbid", strict=True)

    game: RankedGame
    tier: TierName = Field(
        "standard",
        description="standard: "
        + f"{ranked.TIERS['standard'].fps:g} FPS, fast: {ranked.TIERS['fast'].fps:g} FPS",
    )


class Timing(BaseModel):
    """How an episode's agent used its time: frames by how their action came, the slack it
    left (deadline - arrival, ms) and the share of each frame's period it used."""

    on_time: int
    late: int
    fallback: int
    invalid: int
    slack_median_ms: float | None
    slack_p5_ms: float | None
    frame_share_mean: float | None
    frame_share_hist: list[int] | None = Field(
        description="answered frames by the share of the period used: equal bins over [0, 1), "
        "the last one at or past the deadline"
    )


class EpisodeView(BaseModel):
    """One attempt at one episode; its seed only once the episode has been played."""

    episode: int
    attempt: int
    status: str = Field(description="playing, finished, cut_short (played again) or no_show")
    seed: int | None = Field(description="null until the episode has a finished attempt")
    outcome: str | None
    note: str | None
    episode_return: float | None
    frames: int
    timing: Timing | None
    env_server: str | None = Field(
        description="the env server it played on, as a browser reaches it (its lobby)"
    )
    session_id: str | None = Field(
        description="its session on the env server (watched live at {env_server}/watch?session=ID)"
    )
    replay: str | None = Field(description="the replay's URL on its env server, once ended")
    started_at: dt.datetime
    finished_at: dt.datetime | None


class RunView(BaseModel):
    """A ranked run and its episodes."""

    id: int
    agent: str
    version: str
    kind: str = Field(description='"agent", or "reference" for a row the arena enters itself')
    game: str
    tier: str
    fps: float
    seed_set: str
    episodes_planned: int
    episodes_finished: int
    status: str = Field(description="running, finished or abandoned")
    mean_return: float | None = Field(description="over the finished episodes")
    se_return: float | None = Field(description="its standard error")
    created_at: dt.datetime
    finished_at: dt.datetime | None
    episodes: list[EpisodeView]


class RunPage(BaseModel):
    runs: list[RunView]


class EnvAddress(BaseModel):
    grpc: str = Field(description="the env server's Env API, HOST:PORT: Join there")
    http: str = Field(description="its REST API and pages")


class EpisodeAssignment(BaseModel):
    """Where to play a ranked episode: join `session_id` with `session_token` on the env
    server's Env API (Join{session_id, token}) within `join_within_s` seconds."""

    run: int
    episode: int
    of: int = Field(description="episodes in the run")
    attempt: int
    game: str
    tier: str
    fps: float
    max_frames: int = Field(description="the episode stops after this many frames")
    env: EnvAddress
    session_id: str
    session_token: str = Field(description="the session's token: for this agent alone")
    join_within_s: float
    viewer_path: str = Field(description="the env server's websocket that streams the episode")


def timing_columns(profile: EpisodeRecord | standings.Timing) -> dict[str, Any]:
    """The `TIMING` columns of an episode or of a run's timing profile, for a view."""
    return {k: getattr(profile, k) for k in TIMING}


def _timing(e: EpisodeRecord) -> Timing | None:
    if e.status != "finished":
        return None
    return Timing(
        **timing_columns(e),
        frame_share_hist=None if e.frame_share_hist is None else list(e.frame_share_hist),
    )


def run_view(run: RunRecord, shown: Callable[[str], str]) -> RunView:
    """`run` as the API answers it; `shown`: an env server's URL as a person's browser opens
    it, from the one the arena records (`EnvServers.shown`)."""
    played = run.finished_episodes
    returns = [played[i].episode_return or 0.0 for i in sorted(played)]
    return RunView(
        id=run.id,
        agent=run.agent,
        version=run.version,
        kind=run.agent_kind,
        game=run.game_id,
        tier=run.tier,
        fps=run.fps,
        seed_set=run.seed_set,
        episodes_planned=run.episodes_planned,
        episodes_finished=len(played),
        status=run.status,
        mean_return=sum(returns) / len(returns) if returns else None,
        se_return=standard_error(returns) if returns else None,
        created_at=run.created_at,
        finished_at=run.finished_at,
        episodes=[
            EpisodeView(
                episode=e.episode_index,
                attempt=e.attempt,
                status=e.status,
                # Hidden until played: a cut-short or no-show episode is played again.
                seed=e.seed if e.episode_index in played else None,
                outcome=e.outcome,
                note=e.note,
                episode_return=e.episode_return,
                frames=e.frames,
                timing=_timing(e),
                env_server=shown(e.env_server) if e.env_server else None,
                session_id=e.session_id,
                replay=f"{shown(e.env_server)}/v1/replays/{e.replay}" if e.replay else None,
                started_at=e.started_at,
                finished_at=e.finished_at,
            )
            for e in run.attempts
        ],
    )


def _assignment(a: Assignment) -> EpisodeAssignment:
    return EpisodeAssignment(
        run=a.run.id,
        episode=a.episode.episode_index,
        of=a.run.episodes_planned,
        attempt=a.episode.attempt,
        game=a.run.game_id,
        tier=a.run.tier,
        fps=a.run.fps,
        max_frames=a.max_frames,
        env=EnvAddress(grpc=a.env_grpc, http=a.env_url),
        session_id=a.session_id,
        session_token=a.session_token,
        join_within_s=a.join_within_s,
        viewer_path=f"/v1/sessions/{a.session_id}/ws",
    )


async def _version(agents: Agents, limits: RateLimits, token: str | None) -> VersionRecord:
    if token is None:
        raise ArenaError(
            "token_required", "ranked runs need the agent version's token: Authorization: Bearer"
        )
    # Counted by the token's public id (never its secret), before its hash is checked.
    limits.hit("token", identity.token_id(token) or "malformed")
    # scrypt (~50 ms) off the event loop.
    return await asyncio.to_thread(agents.authenticate_token, token)


@router.post(
    "/v1/runs",
    status_code=201,
    responses={
        200: {"description": "the version's unfinished run of this game and tier, to go on"},
        201: {
            "description": "the new run",
            "links": {
                "GetRun": {
                    "operationId": "get_run_v1_runs__run_id__get",
                    "parameters": {"run_id": "$response.body#/id"},
                }
            },
        },
        **responses(
            "malformed_body", *_AUTH, "unknown_game", "run_in_progress", "run_finished",
            "run_abandoned",
        ),
    },
)  # fmt: skip
async def enter_run(
    body: EnterRun,
    agents: Registry,
    runs: RunBook,
    limits: Limits,
    response: Response,
    token: Token = None,
) -> RunView:
    """Enters the token's version in a ranked run of a game at a tier (201), or answers its
    unfinished one (200). One run per version, game and tier; one running run per token."""
    version = await _version(agents, limits, token)
    run, created = runs.enter(version, body.game, body.tier)
    response.status_code = 201 if created else 200
    return run_view(run, runs.envs.shown)


@router.get("/v1/runs", responses=responses())
def list_runs(
    runs: RunBook,
    game: Annotated[str | None, Query(max_length=64, description="a game id")] = None,
    tier: Annotated[TierName | None, Query(description="standard or fast")] = None,
    agent: Annotated[
        str | None,
        Query(
            min_length=1, max_length=NAME_LEN, pattern=NAME_PATTERN, description="an agent's name"
        ),
    ] = None,
) -> RunPage:
    """The runs, oldest first, of a game, tier and agent when given."""
    listed = runs.repository.list_runs(game_id=game, tier=tier, agent=agent)
    return RunPage(runs=[run_view(r, runs.envs.shown) for r in listed])


@router.get("/v1/runs/{run_id}", responses=responses("unknown_run"))
def get_run(run_id: RunId, runs: RunBook) -> RunView:
    """A run and its episode attempts (a seed shows once its episode has been played)."""
    return run_view(runs.run(run_id), runs.envs.shown)


@router.post(
    "/v1/runs/{run_id}/episodes",
    status_code=201,
    responses=responses(
        *_AUTH, "unknown_run", "run_finished", "run_abandoned", "episode_in_progress",
        "env_refused", "env_unavailable",
    ),
)  # fmt: skip
async def next_episode(
    run_id: RunId, agents: Registry, runs: RunBook, limits: Limits, token: Token = None
) -> EpisodeAssignment:
    """Creates the run's next episode on an env server and answers where to join it. One
    episode at a time: the next is handed out once this one has ended."""
    version = await _version(agents, limits, token)
    return _assignment(await runs.next_episode(version, run_id))


@router.delete("/v1/runs/{run_id}", responses=responses(*_AUTH, "unknown_run", "run_finished"))
async def abandon_run(
    run_id: RunId, agents: Registry, runs: RunBook, limits: Limits, token: Token = None
) -> RunView:
    """Abandons the run for good: it never ranks, and the version may enter another run."""
    version = await _version(agents, limits, token)
    return run_view(runs.abandon(version, run_id), runs.envs.shown)
