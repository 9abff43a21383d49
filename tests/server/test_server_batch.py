"""Batched ticks: one vmapped step for the real-time sessions of a (game, FPS) plays each exactly
as it plays alone (frames, returns, replay files apart from timing), through real servers."""

from __future__ import annotations

import asyncio
import time

import jax
import numpy as np
import pytest

from rtplan.harness.checkpoint import planner_path
from rtplan.server import ReplayFile
from rtplan.server._config import SessionConfig
from rtplan.server._frame_info import HostInfo
from rtplan.server._runtime import GameRuntime, state_digest
from rtplan.server._tick_group import TickGroup, TickGroups, _Rows
from rtplan.server._ticker import Ticker
from support import session_ended, write_checkpoints

GAME = "snake-rt-v0"
#: Modest: a reflex answer is on time unless a tick runs a whole period late (timing must not
#: decide what the sessions play, in either mode).
FPS = 10.0
FRAMES = 12
#: More than the first batch's 8 rows: the group grows once.
SEEDS = tuple(range(9))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_checkpoints(tmp_path_factory.mktemp("ckpt"), (GAME,))


def test_a_batched_step_plays_each_row_as_the_single_step_and_keeps_padding(root):
    rt = GameRuntime(GAME, planner_path(root, GAME))
    singles = [rt.init(seed) for seed in (3, 4, 5)]
    states = rt.batch(8)  # the server's first size: one compile for the module
    for slot, (state, _) in enumerate(singles):
        states = rt.put(states, slot, state)
    padding = state_digest(jax.tree.map(lambda x: x[3], states))
    for _ in range(6):
        actions = np.array([info.reflex for _, info in singles] + [0] * 5, np.int32)
        live = np.arange(8) < 3
        states, infos = rt.step_batch(states, actions, live)
        rows = HostInfo.rows(infos, [0, 1, 2])
        singles = [rt.step(s, int(a)) for (s, _), a in zip(singles, actions, strict=False)]
        for slot, ((state, info), row) in enumerate(zip(singles, rows, strict=True)):
            assert row == dataclasses_replace_legal(info, row)
            np.testing.assert_array_equal(row.legal, info.legal)
            assert state_digest(jax.tree.map(lambda x, i=slot: x[i], states)) == state_digest(state)
        assert state_digest(jax.tree.map(lambda x: x[3], states)) == padding
    grown = rt.grow(states, 16)
    assert jax.tree_util.tree_leaves(grown)[0].shape[0] == 16


def test_a_join_donates_the_batch_and_the_members_rows_read_on(root):
    """A put reuses the batch's buffers (no copy of every row); the rows a tick handed its
    members are re-pointed to the result, and rows already on the host keep their copy."""
    rt = GameRuntime(GAME, planner_path(root, GAME))
    (a, _), (b, _), (c, _) = (rt.init(seed) for seed in (3, 4, 5))
    states = rt.put(rt.batch(8), 0, a)
    rows = _Rows(states)
    joined = rt.put(states, 1, b)
    assert states_deleted(states)  # donated: the put wrote into its buffers
    rows.moved(joined)
    assert state_digest(rows.row(0)) == state_digest(a)  # read after the join: still a
    host = _Rows(joined)
    host.row(0)  # on the host now: a view of the buffers, which JAX then does not donate
    again = rt.put(joined, 2, c)
    host.moved(again)
    assert state_digest(host.row(1)) == state_digest(b)
    assert state_digest(jax.tree.map(lambda x: x[2], again)) == state_digest(c)


def _ticking(groups: TickGroups, *, work_s: float) -> TickGroup:
    """A group of `groups` ticking at 20 FPS with no members: each tick holds the event loop
    `work_s` seconds (call on a running loop; cancel its `_task` at the end)."""
    group = groups._groups[("g", 20.0)] = TickGroup(None, 0.05, late_after=0.005)
    group.ticker = Ticker(0.05)

    async def ticks() -> None:
        while True:
            await group.ticker.wait(group._next)
            group._next += 1
            time.sleep(work_s)

    group._task = asyncio.get_running_loop().create_task(ticks())
    return group


def test_a_session_start_waits_for_slack_between_ticks():
    """`TickGroups.slack`: work that holds the event loop (a session's start) begins only when
    the next tick is at least that far away; several callers take the slack in turns."""

    async def scenario() -> list[float]:
        groups = TickGroups(late_after=0.005)
        assert groups.next_tick() is None
        await asyncio.wait_for(groups.slack(1.0), 0.1)  # nothing ticks: at once
        group = _ticking(groups, work_s=0.01)  # the tick's own work
        slack = []
        for _ in range(6):
            await groups.slack(0.03)
            slack.append(groups.next_tick() - time.monotonic())
            time.sleep(0.025)  # the start's work: done before the next tick
        group._task.cancel()
        return slack

    slack = asyncio.run(scenario())
    assert min(slack) >= 0.03 - 0.002 and max(slack) <= 0.05  # (read a moment after)


def test_a_session_start_never_waits_forever_for_slack():
    """Ticks that leave less slack than a start needs: it waits `at_most`, then goes ahead."""

    async def scenario() -> float:
        groups = TickGroups(late_after=0.005)
        group = _ticking(groups, work_s=0.0)
        start = time.monotonic()
        await groups.slack(0.06, at_most=0.2)  # more than a period: never there
        group._task.cancel()
        return time.monotonic() - start

    assert 0.2 <= asyncio.run(scenario()) < 1.0  # (a loaded machine wakes it late)


class _Compiles:
    """A runtime stand-in that records which batch sizes it was asked to compile."""

    def __init__(self) -> None:
        self.warmed = {8}
        self.asked: list[int] = []

    def batch_warmed(self, capacity: int) -> bool:
        return capacity in self.warmed

    def warm_batch(self, capacity: int) -> None:
        self.asked.append(capacity)
        self.warmed.add(capacity)


def test_a_group_compiles_its_next_size_once_half_full_and_never_past_the_limit():
    async def fill(max_rows: int, members: int) -> list[int]:
        runtime = _Compiles()
        group = TickGroup(runtime, 0.05, late_after=0.005, max_rows=max_rows)
        group.capacity = 8
        for slot in range(members):
            group._seats[slot] = object()
            group._grow_ahead()
        if group._ahead is not None:
            await group._ahead
        return runtime.asked

    assert asyncio.run(fill(64, 3)) == []  # under half of 8 rows
    assert asyncio.run(fill(64, 8)) == [16]  # from the 4th member on, once
    assert asyncio.run(fill(8, 8)) == []  # 8 rows hold every session the server allows


def states_deleted(states) -> bool:
    return any(leaf.is_deleted() for leaf in jax.tree_util.tree_leaves(states))


def dataclasses_replace_legal(info: HostInfo, row: HostInfo) -> HostInfo:
    """`info` with `row`'s legal array (arrays compare elementwise: checked apart)."""
    import dataclasses

    return dataclasses.replace(info, legal=row.legal)


def _start(srv, seed: int, max_frames: int = FRAMES) -> str:
    body = dict(game=GAME, agent="reflex", fps=FPS, seed=seed, record=True, max_frames=max_frames)
    return srv.client.post("/v1/sessions", json=body).json()["id"]


def _play(srv) -> dict[int, dict]:
    """Starts a session per seed in one go on the server's event loop (no HTTP round trips
    between them), then waits for each to end."""
    manager = srv.client.app.state.manager

    async def create() -> dict[int, str]:
        configs = {
            seed: SessionConfig(
                GAME,
                seed=seed,
                fps=FPS,
                agent="reflex",
                fallback="reflex",
                record=True,
                max_frames=FRAMES,
            )
            for seed in SEEDS
        }
        return {seed: (await manager.create(cfg)).id for seed, cfg in configs.items()}

    ids = srv.client.portal.call(create)
    return {seed: session_ended(srv.client, sid) for seed, sid in ids.items()}


def _replay(details: dict, *, provenance: bool = True) -> tuple:
    """What must not depend on how the session ticked: the header without its identity and
    time, each frame line without its slack, the end line without the timing statistics.
    `provenance` False: nor whether each reflex answer was on time (a stall of a whole period
    makes the frames that catch up LATE, in either mode; the reflex fallback plays the same)."""
    rf = ReplayFile.read(details["replay"])
    header = {k: v for k, v in rf.header.items() if k not in ("session", "created")}
    frames = [
        (
            f.report.frame,
            f.report.action,
            f.report.provenance if provenance else None,
            f.report.source,
            f.report.received_action,
            f.reward,
            f.done,
            f.state["digest"],
        )
        for f in rf.frames
    ]
    end = {k: rf.end[k] for k in ("frames", "return", "status", "reason")}
    return header, frames, end


@pytest.fixture(scope="module")
def batched(serve, root):
    return serve(checkpoint_dir=root, batch_ticks=True, max_sessions=16)


def test_sessions_play_the_same_batched_or_alone(serve, root, batched):
    alone = serve(checkpoint_dir=root, batch_ticks=False, max_sessions=16)
    a, b = _play(batched), _play(alone)
    played = set()
    for seed in SEEDS:
        # Timing: a tick that fired a whole period late, or a reflex answer that a loaded
        # machine delivered past its deadline (LATE: the reflex fallback plays the same
        # action), decides each frame's provenance, never what is played.
        timely = all(
            x[seed]["stats"]["max_tick_lag_ms"] < 1e3 / FPS
            and x[seed]["stats"]["late"] == x[seed]["stats"]["fallback"] == 0
            for x in (a, b)
        )
        same = _replay(a[seed], provenance=timely) == _replay(b[seed], provenance=timely)
        assert same, (seed, a[seed]["stats"], b[seed]["stats"])
        assert a[seed]["episode_return"] == b[seed]["episode_return"]
        assert a[seed]["frame"] == b[seed]["frame"]
        played.update(f[1] for f in _replay(a[seed])[1])
        stats = a[seed]["stats"]
        assert stats["ticks"] == stats["frames"] == a[seed]["frame"]
    assert len(played) > 1 and sum(a[s]["frame"] for s in SEEDS) > 3 * len(SEEDS)  # not trivial
    manager = batched.client.app.state.manager
    group = manager.ticks.group(GAME, FPS)
    assert len(group) == 0 and group.capacity == 0  # empty: the loop ended, the batch let go
    # The game loaded with the first size compiled; 16 once the group was half full; no more
    # (16 rows hold the server's session limit).
    runtime = manager.runtimes.loaded(GAME)
    assert runtime.batch_warmed(16) and not runtime.batch_warmed(32)
    assert alone.client.app.state.manager.ticks is None


def test_a_stopped_member_leaves_between_ticks_and_the_others_play_on(batched):
    token = {}
    ids = []
    for seed in (0, 1, 2):
        body = dict(game=GAME, agent="reflex", fps=FPS, seed=seed, max_frames=10_000)
        created = batched.client.post("/v1/sessions", json=body).json()
        ids.append(created["id"])
        token[created["id"]] = created["token"]
    ticks = batched.client.app.state.manager.ticks
    _until(lambda: (g := ticks.group(GAME, FPS)) is not None and len(g) == 3)
    group = ticks.group(GAME, FPS)
    gone = ids[0]
    headers = {"authorization": f"Bearer {token[gone]}"}
    assert batched.client.delete(f"/v1/sessions/{gone}", headers=headers).status_code == 200
    frames = {sid: batched.client.get(f"/v1/sessions/{sid}").json()["frame"] for sid in ids[1:]}
    _until(lambda: len(group) == 2)
    time.sleep(3 / FPS)
    for sid in ids[1:]:
        d = batched.client.get(f"/v1/sessions/{sid}").json()
        if d["status"] == "running":  # (a tiny random network's snake may die at once)
            assert d["frame"] > frames[sid]
        headers = {"authorization": f"Bearer {token[sid]}"}
        batched.client.delete(f"/v1/sessions/{sid}", headers=headers)
    _until(lambda: len(group) == 0 and group.capacity == 0)


def _until(done, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end
        time.sleep(0.02)
