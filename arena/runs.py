"""Ranked runs: entering one, handing out its episodes one at a time, and recording each.

An agent version enters a run of a game at a tier (`Runs.enter`), then asks for its episodes
one by one (`Runs.next_episode`): the arena creates a sealed session of the episode's seed on
an env server and answers where to join it; the agent plays it over the ordinary Env API
stream; a watcher reads the session until it ends and commits the episode, with its timing
profile, in its own transaction. The seed is never shown before its episode ends (the env
server's sealed session, and the arena's own views, hide it).

What ends an attempt:

| the session | the attempt | the episode |
|---|---|---|
| ended by the game, its frame cap, the agent leaving or deleting it | `finished` | done |
| stopped because no agent joined in time | `no_show` | played again (nothing was shown) |
| gone, its server unreachable for `lost_after_s`, or failed | `cut_short` | played again |
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from rtplan import __version__
from rtplan.arena import ranked
from rtplan.arena._errors import ArenaError
from rtplan.arena._references import References
from rtplan.arena.agents import Agents
from rtplan.arena.envs import EnvRefused, EnvServers, EnvUnavailable
from rtplan.arena.records import Conflict, EpisodeRecord, RunRecord, VersionRecord
from rtplan.arena.repository import Repository

log = logging.getLogger(__name__)

#: The session statuses of an env server that are still live.
_LIVE = ("waiting", "running")


@dataclass(frozen=True)
class Assignment:
    """Where an agent plays its next ranked episode (its session token is for it alone)."""

    run: RunRecord
    episode: EpisodeRecord
    env_url: str
    env_grpc: str
    session_id: str
    session_token: str
    max_frames: int
    join_within_s: float


@dataclass(frozen=True)
class Ending:
    """How an attempt ended: its status and the `records.ENDING` columns."""

    status: str
    values: dict[str, Any]


def ending_of(details: dict[str, Any]) -> Ending | None:
    """How the attempt whose session is `details` (GET /v1/sessions/{id}) ended; None while
    the session lives."""
    status, reason = details.get("status"), details.get("reason") or ""
    if status in _LIVE:
        return None
    if status == "stopped" and reason.startswith("no agent joined"):
        return Ending("no_show", {"note": reason})
    if status not in ("finished", "stopped"):
        return Ending("cut_short", {"note": f"the env server's session {status}: {reason}"[:255]})
    stats = details.get("stats") or {}
    slack = stats.get("slack_ms") or {}
    share = stats.get("frame_share") or {}
    replay = details.get("replay")
    outcome = reason if status == "finished" else "stopped"
    return Ending(
        "finished",
        {
            "note": None if status == "finished" else reason[:255],
            "outcome": outcome[:16],
            "episode_return": float(details.get("episode_return") or 0.0),
            "frames": int(details.get("frame") or 0),
            "on_time": int(stats.get("on_time", 0)),
            "late": int(stats.get("late", 0)),
            "fallback": int(stats.get("fallback", 0)),
            "invalid": int(stats.get("invalid", 0)),
            "slack_median_ms": slack.get("p50"),
            "slack_p5_ms": slack.get("p5"),
            "frame_share_mean": share.get("mean"),
            "frame_share_hist": share.get("counts"),
            "replay": PurePath(replay).name if replay else None,
        },
    )


class Runs:
    """The ranked runs of an arena, over its repository and its env servers.

    Args:
        repository: the arena's storage.
        envs: the env servers episodes are played on.
        seed_set: the seed set new runs play (`ranked.SEED_SETS`).
        join_within_s: an agent that has not joined its episode's session by then is a no-show.
        poll_s: how often a watcher reads a playing session.
        lost_after_s: an env server unreachable this long has cut its episode short.
    """

    def __init__(
        self,
        repository: Repository,
        envs: EnvServers,
        *,
        seed_set: str = "ranked-v1",
        join_within_s: float = 30.0,
        poll_s: float = 0.5,
        lost_after_s: float = 15.0,
    ) -> None:
        self.repository = repository
        self.envs = envs
        self.seed_set = ranked.SEED_SETS[seed_set]
        self.join_within_s = join_within_s
        self.poll_s = poll_s
        self.lost_after_s = lost_after_s
        self._watchers: dict[int, asyncio.Task] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._references = References(
            run=self.run, hand_out=self._hand_out, watcher=self._watchers.get, poll_s=poll_s
        )

    # ---- lifecycle ----

    async def start(self) -> None:
        """Watches again the attempts a previous arena left playing, and goes on with its
        unfinished reference runs."""
        self._references.start()
        for run in self.repository.runs_where_running_references():
            self._references.queue(run.id)
        for attempt in self.repository.playing_attempts():
            if attempt.session_id is None:  # it stopped before the session was made
                self.repository.end_attempt(
                    attempt.id, "no_show", note="the arena stopped before its session was made"
                )
            else:
                self._watch(attempt)

    async def stop(self) -> None:
        self._references.stop()
        for task in list(self._watchers.values()):
            task.cancel()
        for task in list(self._watchers.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ---- an agent's calls ----

    def enter(
        self, version: VersionRecord, game: str, tier: str, *, player: str | None = None
    ) -> tuple[RunRecord, bool]:
        """Version `version`'s run of `game` at `tier`: its unfinished one, or a new one.

        Returns:
            (the run, whether it is new).

        Raises:
            ArenaError: unknown_game; run_finished or run_abandoned (one run per version,
                game and tier); run_in_progress (another run of the version is running).
        """
        if game not in ranked.GAMES:
            raise ArenaError(
                "unknown_game", f"{game!r} is not ranked here: one of {', '.join(ranked.GAMES)}"
            )
        for _ in range(2):
            run = self.repository.find_run(version.id, game_id=game, tier=tier)
            if run is not None:
                self._check_open(run)
                return run, False
            other = self.repository.running_run(version.id)
            if other is not None:
                raise _in_progress(other)
            try:
                created = self.repository.create_run(
                    version.id,
                    game_id=game,
                    tier=tier,
                    fps=ranked.TIERS[tier].fps,
                    seed_set=self.seed_set.name,
                    episodes_planned=self.seed_set.episodes,
                    seed_order=ranked.seed_order(self.seed_set),
                    player=player,
                )
            except Conflict:
                continue  # another request created one meanwhile: read it again
            return created, True
        raise ArenaError("run_in_progress", "the version's runs changed meanwhile: try again")

    def run(self, run_id: int) -> RunRecord:
        found = self.repository.run(run_id)
        if found is None:
            raise ArenaError("unknown_run", f"no run {run_id} in this arena")
        return found

    def owned(self, version: VersionRecord, run_id: int) -> RunRecord:
        run = self.run(run_id)
        if run.agent_version_id != version.id:
            raise ArenaError(
                "wrong_token", f"run {run_id} is {run.agent} {run.version}'s: use its token"
            )
        return run

    async def next_episode(self, version: VersionRecord, run_id: int) -> Assignment:
        """Creates the session of run `run_id`'s next episode and says where to join it.

        Raises:
            ArenaError: unknown_run, wrong_token (another version's run), run_finished,
                run_abandoned, episode_in_progress (one episode at a time: finish or leave
                the one handed out), env_unavailable or env_refused.
        """
        self.owned(version, run_id)
        return await self._hand_out(run_id)

    async def _hand_out(self, run_id: int) -> Assignment:
        """Creates the session of run `run_id`'s next episode (the reference's player plays
        it, or an outside agent joins it) and starts watching it."""
        async with self._lock(run_id):
            run = self.run(run_id)
            self._check_open(run)
            playing = run.playing
            if playing is not None:
                await self._settle_ending(playing)  # ended a moment ago: committed now
                run = self.run(run_id)
                if run.playing is not None:
                    raise ArenaError(
                        "episode_in_progress",
                        f"episode {run.playing.episode_index} of run {run_id} is being played "
                        f"(session {run.playing.session_id}): play it to its end, or leave it "
                        "and it ends by itself",
                    )
            index = ranked.next_episode(run.episodes_planned, set(run.finished_episodes))
            if index is None:
                self._complete(run)
                raise ArenaError("run_finished", f"run {run_id} has played all its episodes")
            seed_set = ranked.SEED_SETS[run.seed_set]
            tries = sum(1 for e in run.attempts if e.episode_index == index)
            try:
                attempt = self.repository.start_attempt(
                    run.id, index, tries + 1, run.seed_order[index]
                )
            except Conflict:
                raise ArenaError(
                    "episode_in_progress", f"run {run_id} has an episode being handed out"
                ) from None
            body = {
                "game": run.game_id,
                "seed": attempt.seed,
                "fps": run.fps,
                "record": True,
                "sealed": True,
                "max_frames": seed_set.max_frames,
            }
            if run.player is None:
                body.update(agent="grpc", join_within_s=self.join_within_s)
            else:
                body.update(ranked.player_session(run.player))
            try:
                server, answer = await self.envs.create(body)
            except (EnvUnavailable, EnvRefused) as e:
                self.repository.drop_attempt(attempt.id)
                if isinstance(e, EnvRefused):
                    raise ArenaError("env_refused", f"the env server refused: {e.detail}") from None
                raise ArenaError("env_unavailable", f"no env server can play it now: {e}") from None
            self.repository.place_attempt(
                attempt.id, env_server=server.url, session_id=answer["id"]
            )
            attempt = self.repository.attempt(attempt.id)
            self._watch(attempt)
            return Assignment(
                run=self.run(run_id),
                episode=attempt,
                env_url=server.url,
                env_grpc=server.grpc or "",
                session_id=answer["id"],
                session_token=answer["token"],
                max_frames=seed_set.max_frames,
                join_within_s=self.join_within_s,
            )

    # ---- reference runs ----

    def enter_reference(
        self, agents: Agents, game: str, tier: str, player: str
    ) -> tuple[RunRecord, bool]:
        """The reference `player`'s run of `game` at `tier` (`ranked.REFERENCE_PLAYERS`),
        entered as agent `rtplan-<player>` at this rtplan's version, and queued: the arena plays
        reference runs itself, one at a time (none competes with another for the planner).

        Returns:
            (the run, whether it is new).

        Raises:
            ArenaError: unknown_game, unknown_player, run_finished.
        """
        if player not in ranked.REFERENCE_PLAYERS:
            raise ArenaError(
                "unknown_player",
                f"{player!r} is no reference player: one of {', '.join(ranked.REFERENCE_PLAYERS)}",
            )
        version = agents.reference(ranked.REFERENCE_PREFIX + player, __version__)
        run, created = self.enter(version, game, tier, player=player)
        self._references.queue(run.id)
        return run, created

    def abandon(self, version: VersionRecord, run_id: int) -> RunRecord:
        """Ends run `run_id` for good: its episodes stay, it never ranks, and the version
        may enter another run.

        Raises:
            ArenaError: unknown_run, wrong_token, run_finished.
        """
        run = self.owned(version, run_id)
        if run.status == "finished":
            raise ArenaError("run_finished", f"run {run_id} is finished: it stays ranked")
        self.repository.set_run_status(run.id, "abandoned")
        return self.run(run_id)

    # ---- watching sessions ----

    def _watch(self, attempt: EpisodeRecord) -> None:
        self.envs.by_url(attempt.env_server).playing += 1
        task = asyncio.get_running_loop().create_task(
            self._watch_until_ended(attempt), name=f"arena episode {attempt.id}"
        )
        self._watchers[attempt.id] = task
        task.add_done_callback(lambda _: self._watchers.pop(attempt.id, None))

    async def _watch_until_ended(self, attempt: EpisodeRecord) -> None:
        unreachable_since: float | None = None
        server = self.envs.by_url(attempt.env_server)
        try:
            while True:
                try:
                    if await self._settle(attempt) == "over":
                        return
                    unreachable_since = None
                except EnvUnavailable as e:
                    now = time.monotonic()
                    unreachable_since = unreachable_since or now
                    if now - unreachable_since >= self.lost_after_s:
                        note = f"env server {attempt.env_server} unreachable: {e}"
                        self._end(attempt, "cut_short", {"note": note[:255]})
                        return
                await asyncio.sleep(self.poll_s)
        except Exception:  # a bug must not end the arena; the next start watches it again
            log.exception("watching episode attempt %d failed", attempt.id)
        finally:
            server.playing = max(0, server.playing - 1)

    async def _settle_ending(self, attempt: EpisodeRecord, wait_s: float = 3.0) -> None:
        """Settles the attempt now, waiting up to `wait_s` for a session whose game is over
        but which has not ended yet (its agent asked for the next episode at once)."""
        end = time.monotonic() + wait_s
        try:
            while await self._settle(attempt) == "ending" and time.monotonic() < end:
                await asyncio.sleep(0.05)
        except EnvUnavailable:
            return  # its watcher decides

    async def _settle(self, attempt: EpisodeRecord) -> str:
        """Reads the attempt's session once and commits its end if it ended: "over" (ended,
        here or elsewhere), "ending" (its game is over, the session not ended yet) or "live".

        Raises:
            EnvUnavailable: its env server cannot be reached now.
        """
        details = await self.envs.session(attempt.env_server, attempt.session_id)
        if details is None:
            note = f"session {attempt.session_id} is gone from {attempt.env_server}"
            self._end(attempt, "cut_short", {"note": note[:255]})
            return "over"
        ending = ending_of(details)
        if ending is None:
            return "ending" if details.get("done") else "live"
        self._end(attempt, ending.status, ending.values)
        return "over"

    def _end(self, attempt: EpisodeRecord, status: str, values: dict[str, Any]) -> None:
        if not self.repository.end_attempt(attempt.id, status, **values):
            return  # ended by another watcher or process
        log.info(
            "run %d episode %d attempt %d: %s%s",
            attempt.run_id,
            attempt.episode_index,
            attempt.attempt,
            status,
            f" (return {values['episode_return']:g})" if status == "finished" else "",
        )
        run = self.repository.run(attempt.run_id)
        done = run is not None and len(run.finished_episodes) >= run.episodes_planned
        if done and run.status == "running":
            self._complete(run)

    def _complete(self, run: RunRecord) -> None:
        if run.status != "finished":
            self.repository.set_run_status(run.id, "finished")

    # ---- helpers ----

    @staticmethod
    def _check_open(run: RunRecord) -> None:
        if run.status == "finished":
            raise ArenaError(
                "run_finished",
                f"{run.agent} {run.version} has played its ranked run of {run.game_id} at the "
                f"{run.tier} tier (run {run.id}): one run per version, game and tier; "
                "register a new version to run again",
            )
        if run.status == "abandoned":
            raise ArenaError(
                "run_abandoned",
                f"run {run.id} of {run.agent} {run.version} was abandoned: one run per version, "
                "game and tier; register a new version to run again",
            )

    def _lock(self, run_id: int) -> asyncio.Lock:
        return self._locks.setdefault(run_id, asyncio.Lock())


def _in_progress(run: RunRecord) -> ArenaError:
    return ArenaError(
        "run_in_progress",
        f"{run.agent} {run.version} is running run {run.id} ({run.game_id}, {run.tier} tier): "
        "a token holds one run at a time; finish or abandon it first",
    )


def iter_finished(run: RunRecord) -> Iterator[EpisodeRecord]:
    """The run's finished episodes by index."""
    finished = run.finished_episodes
    for i in sorted(finished):
        yield finished[i]
