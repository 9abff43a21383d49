"""What /tv shows: the live sessions in turn (as lichess TV), each for a turn or until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from rtplan import games
from rtplan.server._config import SessionConfig


class Shown(Protocol):
    """What the rotation reads of a session."""

    id: str
    created: float
    config: SessionConfig

    @property
    def live(self) -> bool: ...

    @property
    def status(self) -> str: ...


def interest(session: Shown) -> int:
    """How much a live session is worth showing, lower first: 0 the planner or a person plays
    it (the planner agent, a person, or a clock game's planner opponent), 1 a running game of
    the reflex, random or an Env API agent, 2 a session that waits (nobody plays yet)."""
    if session.status != "running":
        return 2
    cfg = session.config
    clock = games.kind_of(cfg.game_id) is games.Kind.CLOCK
    return 0 if cfg.agent in ("planner", "human") or (clock and cfg.opponent_plans) else 1


def next_on_air(live: Sequence[Shown], on: Shown | None) -> Shown | None:
    """The live session that follows `on` (any session, or None): among the most interesting
    of `live` (`interest`), the first created after `on`, else the first; None when none is
    live."""
    if not live:
        return None
    best = min(interest(s) for s in live)
    turn = sorted((s for s in live if interest(s) == best), key=lambda s: (s.created, s.id))
    if on is None:
        return turn[0]
    after = [s for s in turn if (s.created, s.id) > (on.created, on.id)]
    return (after or turn)[0]


class TvRotation:
    """The session /tv shows: a live one for `turn_s` seconds or until it ends, then the next
    (`next_on_air`), so that every page shows the same game at the same time. A session that
    waits gives way at once to one that is played; a live featured session (the demo's game)
    goes on air whenever nothing live is; with nothing live, the game last shown stays (its
    final board and result)."""

    def __init__(self, turn_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.turn_s = turn_s
        self._clock = clock
        self._on: str | None = None  # the session on air
        self._since = 0.0  # when it went on air

    def pick(self, sessions: Sequence[Shown], featured: str | None = None) -> Shown | None:
        """The session on air now among `sessions` (`featured`: the id of the featured
        session); it moves on once its turn is over and another is live, or it ended."""
        by_id = {s.id: s for s in sessions}
        on = by_id.get(self._on) if self._on else None
        live = [s for s in sessions if s.live]
        now = self._clock()
        if on is not None and on.live:
            others = [s for s in live if s is not on]
            idle = interest(on) == 2 and any(interest(s) < 2 for s in others)
            if not others or (now - self._since < self.turn_s and not idle):
                return on
            chosen = next_on_air(live, on)  # `on` again when it alone is worth the most
        else:
            chosen = by_id.get(featured) if featured else None
            if chosen is None or not chosen.live:
                chosen = next_on_air(live, on)
        if chosen is None:  # nothing live: the game last shown stays, else the featured one
            newest = max(sessions, key=lambda s: s.created) if sessions else None
            return on or by_id.get(featured) or newest
        self._on, self._since = chosen.id, now
        return chosen
