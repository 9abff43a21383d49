"""The board router: the leaderboard, the rules of ranked runs, and entering the reference
players (the runs each leaderboard is paired against)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from rtplan.arena import ranked
from rtplan.arena._deps import ADMIN_ERRORS, Admin, Registry, RunBook
from rtplan.arena._errors import ArenaError, responses
from rtplan.arena._routes_runs import (
    RANKED_GAME,
    RankedGame,
    RunPage,
    TierName,
    run_view,
    timing_columns,
)
from rtplan.arena.standings import Row, board

# The same tag as the runs router's: the API document is unchanged by the split.
router = APIRouter(tags=["runs"])

#: A reference player (listed in the document; any other string: `unknown_player`).
ReferencePlayer = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="a reference player",
        json_schema_extra={"enum": list(ranked.REFERENCE_PLAYERS)},
    ),
]


class EnterReferences(BaseModel):
    """Body of POST /v1/references."""

    model_config = ConfigDict(extra="forbid", strict=True)

    game: RankedGame
    tier: TierName = "standard"
    players: list[ReferencePlayer] = Field(
        min_length=1,
        max_length=len(ranked.REFERENCE_PLAYERS),
        description="reference players: " + ", ".join(ranked.REFERENCE_PLAYERS),
    )


@router.post(
    "/v1/references",
    status_code=202,
    dependencies=[Admin],
    responses=responses(
        "malformed_body", *ADMIN_ERRORS, "unknown_game", "unknown_player", "run_finished"
    ),
)
def enter_references(body: EnterReferences, agents: Registry, runs: RunBook) -> RunPage:
    """Enters reference players in ranked runs of a game at a tier (an administration call):
    the arena plays them itself, one run at a time, through the same sessions as any agent's.
    A player whose run is finished is left out."""
    entered = []
    for player in dict.fromkeys(body.players):
        try:
            run, _ = runs.enter_reference(agents, body.game, body.tier, player)
        except ArenaError as e:
            if e.kind != "run_finished" or len(body.players) == 1:
                raise
            continue
        entered.append(run_view(run, runs.envs.shown))
    return RunPage(runs=entered)


class BoardRow(BaseModel):
    """A finished run on the leaderboard."""

    run: int
    agent: str
    version: str
    kind: str
    episodes: int
    mean_return: float
    se_return: float
    vs_best_reference: float | None = Field(
        description="mean per-seed return difference to the best reference (null: none, or it)"
    )
    vs_best_reference_se: float | None = Field(description="its paired standard error")
    best_reference: str | None
    frames: int
    on_time: float = Field(description="share of the frames answered on time")
    late: float
    fallback: float
    invalid: float
    slack_median_ms: float | None
    slack_p5_ms: float | None
    frame_share_mean: float | None = Field(description="mean share of the frame used")


class Board(BaseModel):
    game: str
    tier: str
    seed_set: str
    rows: list[BoardRow]


def _board_row(row: Row) -> BoardRow:
    vs = row.vs_best or (None, None)
    t = row.timing
    return BoardRow(
        run=row.run.id,
        agent=row.run.agent,
        version=row.run.version,
        kind=row.run.agent_kind,
        episodes=len(row.returns),
        mean_return=row.mean,
        se_return=row.se,
        vs_best_reference=vs[0],
        vs_best_reference_se=vs[1],
        best_reference=row.best_reference,
        frames=t.frames,
        **timing_columns(t),
    )


@router.get("/v1/leaderboard", responses=responses("unknown_game"))
def leaderboard(
    runs: RunBook,
    game: Annotated[str, Query(**RANKED_GAME)],
    tier: Annotated[TierName, Query(description="standard or fast")] = "standard",
    seed_set: Annotated[
        str, Query(min_length=1, max_length=64, description="a seed set")
    ] = "ranked-v1",
) -> Board:
    """The finished runs of a game, tier and seed set, best mean return first, each paired
    against the best reference on the same seeds, with its timing profile."""
    if game not in ranked.GAMES:
        raise ArenaError(
            "unknown_game", f"{game!r} is not ranked here: one of {', '.join(ranked.GAMES)}"
        )
    listed = runs.repository.list_runs(game_id=game, tier=tier, seed_set=seed_set)
    return Board(
        game=game, tier=tier, seed_set=seed_set, rows=[_board_row(r) for r in board(listed)]
    )


class TierView(BaseModel):
    name: str
    fps: float


class SeedSetView(BaseModel):
    """A pre-registered seed set: episode i of a run plays seed `first_seed + i`."""

    name: str
    first_seed: int
    episodes: int
    max_frames: int = Field(description="each episode stops after this many frames")


class RankedView(BaseModel):
    """What ranked runs are here: the games, the tiers and the seed sets a leaderboard is
    drawn for, and the set new runs play."""

    games: list[str]
    tiers: list[TierView]
    seed_sets: list[SeedSetView]
    seed_set: str = Field(description="the seed set new runs play on this arena")
    env_servers: list[str] = Field(
        description="the env servers its episodes play on, as a browser reaches them: their "
        "lobbies list the ranked episodes playing, to watch live"
    )


@router.get("/v1/ranked", responses=responses())
def ranked_rules(runs: RunBook) -> RankedView:
    """The games, tiers and seed sets of ranked runs (docs/preregistration.md), the seed set
    this arena's new runs play, and the env servers they play on."""
    return RankedView(
        games=list(ranked.GAMES),
        tiers=[TierView(name=t.name, fps=t.fps) for t in ranked.TIERS.values()],
        seed_sets=[
            SeedSetView(
                name=s.name, first_seed=s.first_seed, episodes=s.episodes, max_frames=s.max_frames
            )
            for s in ranked.SEED_SETS.values()
        ],
        seed_set=runs.seed_set.name,
        env_servers=[s.shown_url for s in runs.envs.servers],
    )
