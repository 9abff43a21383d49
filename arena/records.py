"""The arena's stored records (frozen, built from rows) and its storage errors.

`repository.py` reads and writes them; everything above it gets these records, never a row.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from rtplan.arena.identity import StoredToken


class StorageError(Exception):
    """The database cannot be used: a bad URL, unreachable, or a schema this code cannot read."""


class SchemaTooNew(StorageError):
    """The database's schema revision is not one of this code's: a newer rtplan migrated it."""


class Conflict(StorageError):
    """A write broke a uniqueness rule: `what` is "agent" (the name exists) or "version"."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} exists")
        self.what = what


class Stale(StorageError):
    """A token changed (regenerated or revoked) between its check and the write that needed
    it unchanged."""


@dataclass(frozen=True)
class VersionRecord:
    """One version of an agent, with what is stored of its token.

    Attributes:
        id: the version's row id.
        name: the agent's name; `kind` its kind ("agent" or "reference").
        version: the version's label.
        created_at: when it was registered (UTC).
        token: what is stored of its current token (`identity.StoredToken`).
        token_created_at: when that token was made (UTC).
        revoked_at: when its token was revoked (UTC), or None while it is live.
    """

    id: int
    name: str
    kind: str
    version: str
    created_at: dt.datetime
    token: StoredToken
    token_created_at: dt.datetime
    revoked_at: dt.datetime | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@dataclass(frozen=True)
class AgentRecord:
    """An agent and its versions, oldest first."""

    name: str
    kind: str
    created_at: dt.datetime
    versions: tuple[VersionRecord, ...]

    def version(self, label: str) -> VersionRecord | None:
        return next((v for v in self.versions if v.version == label), None)


@dataclass(frozen=True)
class EpisodeRecord:
    """One attempt at one episode of a run (`_schema.episodes`): `status` "playing",
    "finished", "cut_short" or "no_show"; the timing profile once it finished."""

    id: int
    run_id: int
    episode_index: int
    attempt: int
    seed: int
    status: str
    note: str | None
    outcome: str | None
    episode_return: float | None
    frames: int
    on_time: int
    late: int
    fallback: int
    invalid: int
    slack_median_ms: float | None
    slack_p5_ms: float | None
    frame_share_mean: float | None
    frame_share_hist: tuple[int, ...] | None
    env_server: str | None
    session_id: str | None
    replay: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class RunRecord:
    """A ranked run (`_schema.runs`) with the agent version it is, and its episode attempts
    in play order."""

    id: int
    agent_version_id: int
    agent: str
    agent_kind: str
    version: str
    game_id: str
    tier: str
    fps: float
    seed_set: str
    episodes_planned: int
    player: str | None
    seed_order: tuple[int, ...]
    status: str
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    attempts: tuple[EpisodeRecord, ...] = ()

    @property
    def finished_episodes(self) -> dict[int, EpisodeRecord]:
        """Episode index -> its finished attempt."""
        return {e.episode_index: e for e in self.attempts if e.status == "finished"}

    @property
    def by_seed(self) -> dict[int, EpisodeRecord]:
        """Seed -> its finished episode (what two runs of a seed set pair on)."""
        return {e.seed: e for e in self.attempts if e.status == "finished"}

    @property
    def playing(self) -> EpisodeRecord | None:
        return next((e for e in self.attempts if e.status == "playing"), None)


#: The timing profile's columns: an episode's, and a run's over its episodes (the API's views
#: show these beside each other).
TIMING = (
    "on_time",
    "late",
    "fallback",
    "invalid",
    "slack_median_ms",
    "slack_p5_ms",
    "frame_share_mean",
)
#: The columns an attempt's end writes (`Repository.end_attempt`).
ENDING = (
    "note",
    "outcome",
    "episode_return",
    "frames",
    *TIMING,
    "frame_share_hist",
    "replay",
)


def utc(value: dt.datetime | None) -> dt.datetime | None:
    """A stored time as an aware UTC time (None stays None)."""
    # SQLite hands back the naive UTC time it stored; PostgreSQL an aware one.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=dt.UTC)


_TIMES = ("started_at", "finished_at", "created_at", "updated_at")


def version_record(row) -> VersionRecord:
    """The version of an `agent_versions` row joined with its agent's name and kind."""
    return VersionRecord(
        id=row["id"],
        name=row["name"],
        kind=row["agent_kind"],
        version=row["version"],
        created_at=utc(row["created_at"]),
        token=StoredToken(
            row["token_id"],
            bytes(row["token_salt"]),
            bytes(row["token_digest"]),
            row["token_scheme"],
        ),
        token_created_at=utc(row["token_created_at"]),
        revoked_at=utc(row["revoked_at"]),
    )


def episode_record(row) -> EpisodeRecord:
    """The attempt of an `episodes` row."""
    hist = row["frame_share_hist"]
    return EpisodeRecord(
        **{
            k: row[k]
            for k in EpisodeRecord.__dataclass_fields__
            if k not in _TIMES + ("frame_share_hist",)
        },
        frame_share_hist=None if hist is None else tuple(int(v) for v in hist),
        started_at=utc(row["started_at"]),
        finished_at=utc(row["finished_at"]),
    )


def run_record(row, attempts: list[EpisodeRecord]) -> RunRecord:
    """The run of a `runs` row joined with its agent version, and its attempts."""
    fields = [
        k for k in RunRecord.__dataclass_fields__ if k not in (*_TIMES, "attempts", "seed_order")
    ]
    return RunRecord(
        **{k: row[k] for k in fields},
        seed_order=tuple(int(v) for v in row["seed_order"] or ()),
        created_at=utc(row["created_at"]),
        updated_at=utc(row["updated_at"]),
        finished_at=utc(row["finished_at"]),
        attempts=tuple(attempts),
    )


def token_columns(token: StoredToken) -> dict:
    """The `agent_versions` columns that store `token`."""
    return {
        "token_id": token.token_id,
        "token_salt": token.salt,
        "token_digest": token.digest,
        "token_scheme": token.scheme,
    }
