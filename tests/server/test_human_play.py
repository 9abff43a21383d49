"""Human play on the session itself (no browser, no loop): a time control in seconds with an
increment, the countdown, and Pac-Man's buffered turn, with arrivals placed by hand."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from rtplan import games
from rtplan.server import ReplayFile, replay
from rtplan.server import _messages as messages
from rtplan.server._agents import make_opponent
from rtplan.server._config import SessionConfig
from rtplan.server._human import HumanAgent
from rtplan.server._rules import Arrival, Provenance
from rtplan.server._runtime import AGENT_PLAYER, GameRuntime
from rtplan.server.session import Session


def session(game_id: str, tmp_path=None, **cfg) -> Session:
    config = SessionConfig(game_id=game_id, agent="human", opponent="random", **cfg)
    runtime = GameRuntime(game_id, None)
    buffers = games.game_record(game_id).buffer_turns
    return Session(
        config,
        runtime,
        agent=HumanAgent(buffers_turns=buffers),
        opponent=make_opponent(config) if runtime.kind is games.Kind.CLOCK else None,
        record_dir=tmp_path,
        countdown_s=3.0,
    )


def test_a_hex_game_at_1_plus_1_lasts_its_clock_and_gives_the_increment_back(tmp_path):
    async def main():
        s = session("speed-hex-v0", tmp_path, time_s=60.0, increment_s=1.0, record=True)
        ticks = round(60 / s.tick_s)
        assert s.info.clocks == (ticks, ticks) and s.increment == round(1 / s.tick_s)
        s.starts_at = 100.0
        while s.info.current_player != AGENT_PLAYER:  # the random opponent first, when drawn
            s.deadline = s._chess_deadline(100.0)
            s._step(s.opponent)
        # The person's first move may take the whole minute: its deadline is 60 s away.
        s.published_at = 100.0
        s.deadline = s._chess_deadline(100.0)
        assert s.deadline - 100.0 == pytest.approx(60.0)
        # A move after 2.5 s costs 2.5 s of ticks and gives one second back.
        cell = int(np.flatnonzero(s.info.legal)[0])
        s.agent.receive(s.frame, Arrival(cell, 102.5))
        s._step(s.agent)
        r = s.last_report
        assert (r.source, r.provenance) == ("human", Provenance.ON_TIME)
        assert r.cost == round(2.5 / s.tick_s) and r.credit == s.increment
        assert s.info.clocks[AGENT_PLAYER] == ticks - r.cost + s.increment
        s._finish("stopped", "test")
        # The replay re-simulates from the recorded clock start and credits.
        assert ReplayFile.read(s.replay_path).header["initial_time"] == ticks
        assert replay(s.replay_path).frames == s.frame

    asyncio.run(main())


def test_a_missed_move_empties_the_clock_and_gets_no_increment():
    async def main():
        s = session("speed-hex-v0", time_s=1.0, increment_s=1.0)
        while s.info.current_player != AGENT_PLAYER:
            s.deadline = s._chess_deadline(100.0)
            s._step(s.opponent)
        s.published_at, s.deadline = 100.0, s._chess_deadline(100.0)
        s._step(s.agent)  # nothing came: the fallback plays and the clock is spent
        assert s.last_report.provenance is Provenance.FALLBACK
        assert s.info.clocks[AGENT_PLAYER] == 0 and s.last_report.credit == 0

    asyncio.run(main())


def test_a_time_control_is_for_the_clock_games_in_real_time():
    from rtplan.server._config import SessionError
    from rtplan.server._manager import _check_game
    from rtplan.server._runtime import Runtimes
    from rtplan.server.settings import Settings

    runtimes = Runtimes(Settings().checkpoint_dir)
    for cfg in (
        SessionConfig(game_id="snake-rt-v0", agent="human", time_s=60.0),
        SessionConfig(game_id="speed-hex-v0", agent="grpc", clock="simulated", time_s=60.0),
    ):
        with pytest.raises(SessionError, match="time_s and increment_s are for the clock games"):
            _check_game(cfg, runtimes, Settings())


def test_a_buffered_pacman_turn_applies_at_the_first_legal_frame():
    async def main():
        s = session("pacman-rt-v0")
        s.starts_at = 0.0
        names = s.runtime.game.action_names
        s.published_at, s.deadline = 0.0, 1.0
        go = int(np.flatnonzero(s.info.legal[:4])[0])  # set off (the fallback keeps going)
        s.submit(s.frame, go, 0.5)
        s._step(s.agent)
        # Press a turn across the corridor, into a wall: up/down when going right/left.
        turn = next(a for a in range(4) if a % 2 != go % 2 and not s.info.legal[a])
        assert s.submit(s.frame, turn, 0.5) is None  # no "illegal" error: it waits
        s._step(s.agent)
        assert s.pending_turn == turn and s.last_report.provenance is Provenance.FALLBACK
        waited = 1
        while not s.info.legal[turn]:
            s._step(s.agent)
            assert s.pending_turn == turn
            waited += 1
            assert waited < 300, f"{names[turn]} never became legal"
        legal_at = s.frame
        s._step(s.agent)
        r = s.last_report
        assert (r.frame, r.action, r.source, r.provenance) == (
            legal_at,
            turn,
            "human",
            Provenance.ON_TIME,
        )
        assert s.pending_turn is None

    asyncio.run(main())


@pytest.mark.parametrize("timeout", ["reflex", "strict"])
def test_the_increment_goes_to_a_clock_with_time_left_only(timeout):
    import jax

    game = games.make("speed-hex-v0", initial_time=10, timeout=timeout)
    state = game.init(jax.random.PRNGKey(0))
    mover = int(state.current_player)
    cell = int(np.flatnonzero(np.asarray(state.legal_action_mask))[0])
    moved = game.step(state, cell, 4, 3)  # 4 ticks thought, 3 back
    assert int(moved.inner.clocks[mover]) == 10 - 4 + 3
    spent = game.step(state, cell, 10, 3)  # the whole clock: no increment (strict: lost)
    assert int(spent.inner.clocks[mover]) == 0
    assert bool(spent.inner.timed_out) == (timeout == "strict")


def test_a_first_key_that_comes_late_still_ends_the_fair_start():
    # Until a person's first key the reflex answers their frames (the fair start). A loaded
    # page's first key can miss its frame: it is still their first, and its frame says it came late.
    async def main():
        s = session("snake-rt-v0")
        s.starts_at = 0.0
        s._publish(1.0, now=0.0)
        assert s.agent.answer(s.frame, s).safe_fallback  # nothing pressed: the reflex steers
        s._step(s.agent)
        assert s.last_report.provenance is Provenance.FALLBACK
        # The fair start's frame is shown as the reflex's, not as a missed deadline.
        assert s.last_report.fair_start and s.last_report.shown_source == "reflex"
        assert messages.report_json(s.last_report)["source"] == "reflex"
        s._publish(2.0, now=1.0)
        key = int(np.flatnonzero(s.info.legal)[0])
        assert s.submit(0, key, 1.05) is None  # frame 0's key, 50 ms after its deadline
        assert not s.agent.answer(s.frame, s).safe_fallback  # from now on the session's fallback
        s._step(s.agent)
        s._publish(3.0, now=2.0)
        (late,) = messages.viewer_frame(s)["late"]  # the next frame message carries it
        assert (late["frame"], late["provenance"], late["received_action"]) == (0, "late", key)
        assert messages.viewer_frame(s)["previous"]["frame"] == 1
        # After the person's first key a frame with none is the fallback's, shown so.
        assert not s.last_report.fair_start and s.last_report.shown_source == "fallback"

    asyncio.run(main())
