"""/tv's rotation (`server._tv`), with a fake clock: the live sessions in turn, a turn each or
until one ends, the planner's and people's games first, a waiting one giving way at once."""

from __future__ import annotations

from types import SimpleNamespace

from rtplan.server._config import SessionConfig
from rtplan.server._tv import TvRotation, interest

TURN_S = 10.0


def _session(sid: str, created: float, *, status="running", **config) -> SimpleNamespace:
    cfg = SessionConfig(game_id=config.pop("game_id", "snake-rt-v0"), **config)
    return SimpleNamespace(
        id=sid, created=created, config=cfg, status=status, live=status in ("running", "waiting")
    )


def _tv():
    now = [0.0]
    return TvRotation(TURN_S, clock=lambda: now[0]), now


def test_live_games_take_turns_and_a_game_that_ends_hands_over_at_once():
    tv, now = _tv()
    a, b, c = (_session(x, i, agent="reflex") for i, x in enumerate("abc"))
    sessions = [a, b, c]
    assert tv.pick(sessions) is a
    now[0] = TURN_S - 0.1
    assert tv.pick(sessions) is a
    now[0] = TURN_S
    assert tv.pick(sessions) is b
    now[0] += TURN_S
    assert tv.pick(sessions) is c
    now[0] += TURN_S
    assert tv.pick(sessions) is a  # round again
    now[0] += 1
    a.status, a.live = "finished", False  # ended within its turn: the next at once
    assert tv.pick(sessions) is b
    b.status = c.status = "finished"
    b.live = c.live = False
    assert tv.pick(sessions) is b  # nothing live: the game shown last stays


def test_the_planners_and_peoples_games_come_first_and_a_waiting_one_gives_way():
    tv, now = _tv()
    waiting = _session("w", 0, status="waiting")  # an Env API agent's, not joined yet
    reflex = _session("r", 1, agent="reflex")
    assert tv.pick([waiting]) is waiting
    assert tv.pick([waiting, reflex]) is reflex  # at once: nobody plays the waiting one
    planner = _session("p", 2, agent="planner", ks=(2,))
    human = _session("h", 3, agent="human", game_id="speed-hex-v0")
    hex_planner = _session("o", 4, agent="reflex", game_id="speed-hex-v0", opponent="gate")
    assert [interest(s) for s in (waiting, reflex, planner, human, hex_planner)] == [2, 1, 0, 0, 0]
    sessions = [waiting, reflex, planner, human, hex_planner]
    assert tv.pick(sessions) is reflex  # its turn runs out first
    shown = []
    for _ in range(4):
        now[0] += TURN_S
        shown.append(tv.pick(sessions).id)
    assert shown == ["p", "h", "o", "p"]  # the reflex's game waits while these are live


def test_the_featured_game_goes_on_air_when_nothing_live_is():
    tv, now = _tv()
    other = _session("x", 0, agent="planner", ks=(2,))
    demo = _session("d", 1, agent="planner")
    assert tv.pick([other, demo], featured="d") is demo  # first
    now[0] += TURN_S
    assert tv.pick([other, demo], featured="d") is other  # then in turn, not pinned
    other.status, other.live = "finished", False
    demo.status, demo.live = "finished", False
    later = _session("d2", 2, agent="planner")  # the demo's next game
    assert tv.pick([other, demo, later], featured="d2") is later
