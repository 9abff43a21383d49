"""Batched searches across sessions: a batched answer equals the answer alone, exactly; groups
never mix; requests pile up while the slots are busy; a search that cannot land is never
started."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import grpc
import jax
import numpy as np
import pytest

from rtplan import wire
from rtplan.planner_service import BackgroundService, Engine
from rtplan.planner_service._batcher import Batcher, search_rungs
from rtplan.planner_service.engine import NotStartedError
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import write_planner

SNAKE = "snake-rt-v0"
#: Compiles faster, runs slower: these tests compare answers, not time them.
FAST = {"xla_backend_optimization_level": 0}


def test_search_rungs_double_from_two_up_to_the_largest_batch():
    assert search_rungs(2) == (2,)
    assert search_rungs(8) == (2, 4, 8)
    assert search_rungs(6) == (2, 4, 6)
    with pytest.raises(ValueError, match="max_batch >= 2"):
        search_rungs(1)


# The batcher alone (no JAX) ------------------------------------------------------------------


class _Calls:
    """A `run_batch` that records each call and, when `hold` is set, blocks until released."""

    def __init__(self, hold: bool = False, seconds: float = 0.0) -> None:
        self.calls: list[tuple[object, list]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.seconds = seconds

    def __call__(self, group, payloads):
        self.calls.append((group, list(payloads)))
        self.started.set()
        self.release.wait(10)
        time.sleep(self.seconds)
        return [(group, p) for p in payloads]


def _threads(batcher: Batcher, requests, **kwargs) -> tuple[list[threading.Thread], dict]:
    answers: dict = {}

    def ask(group, payload) -> None:
        try:
            answers[payload] = batcher.run(group, payload, **kwargs)
        except Exception as e:
            answers[payload] = e

    threads = [threading.Thread(target=ask, args=r) for r in requests]
    for t in threads:
        t.start()
    return threads, answers


def test_requests_pile_up_while_the_slot_is_busy_and_leave_as_one_batch_per_group():
    calls = _Calls(hold=True)
    batcher = Batcher(calls, max_batch=4, slots=1, max_wait_s=0.0)
    threads, answers = _threads(batcher, [("a", 0)])
    assert calls.started.wait(5)  # the slot is busy with request 0
    # Six of group a and two of group b arrive meanwhile, in this order.
    for r in [("a", i) for i in range(1, 7)] + [("b", 10), ("b", 11)]:
        more, got = _threads(batcher, [r])
        threads += more
        answers[r[1]] = got
        time.sleep(0.02)  # arrival order is the order above
    calls.release.set()
    for t in threads:
        t.join(10)
    # The slot frees once per call: a's oldest four, then a's other two and b's (oldest first).
    assert calls.calls == [("a", [0]), ("a", [1, 2, 3, 4]), ("a", [5, 6]), ("b", [10, 11])]
    for payload, got in answers.items():
        group = "a" if payload < 10 else "b"
        assert (got if payload == 0 else got[payload]) == (group, payload)
    assert batcher.stats.batches == {1: 1, 4: 1, 2: 2} and batcher.stats.requests == 9


def test_a_request_its_deadline_leaves_no_time_for_is_never_started():
    clock = [100.0]
    calls = _Calls()
    batcher = Batcher(calls, max_batch=4, slots=1, max_wait_s=0.0, clock=lambda: clock[0])

    def timed(group, payloads):  # each call takes 30 ms of the fake clock
        clock[0] += 0.030
        return calls(group, payloads)

    batcher._run_batch = timed
    assert batcher.run("a", 1, deadline=clock[0] + 1.0) == ("a", 1)
    assert batcher.estimate("a") == pytest.approx(0.030)
    # 20 ms left, a search of the kind takes 30: refused unstarted, nothing runs.
    with pytest.raises(NotStartedError, match=r"not started: 20.0 ms left .* ~30.0 ms"):
        batcher.run("a", 2, deadline=clock[0] + 0.020)
    assert len(calls.calls) == 1 and batcher.stats.not_started == 1
    # Another group has no measured time yet: only a deadline already past refuses it.
    assert batcher.run("b", 3, deadline=clock[0] + 0.001) == ("b", 3)
    with pytest.raises(NotStartedError):
        batcher.run("c", 4, deadline=clock[0])


def test_a_slow_spell_never_drops_every_later_request_of_its_group():
    # A first batched call that took 500 ms (a cold executable, a loaded machine) once made
    # every later request of a 200 ms window "not started" for good: never run, never timed.
    clock = [100.0]
    seconds = [0.5]
    calls = _Calls()
    batcher = Batcher(calls, max_batch=4, slots=1, max_wait_s=0.0, clock=lambda: clock[0])

    def timed(group, payloads):
        clock[0] += seconds[0]
        return calls(group, payloads)

    batcher._run_batch = timed
    batcher.run("a", 0, deadline=clock[0] + 1.0)
    seconds[0] = 0.030
    dropped = 0
    for i in range(1, 20):
        try:
            batcher.run("a", i, deadline=clock[0] + 0.2)
            break
        except NotStartedError:
            dropped += 1
            clock[0] += 0.1  # the session's next decision
    assert 0 < dropped <= 5, dropped  # 0.5 s * 0.8**n fits 0.2 s again by n = 5
    assert len(calls.calls) == 2
    # Timed again: the fast end of its calls, not their mean (a slow call counts a tenth).
    assert batcher.estimate("a") == pytest.approx(0.030)
    seconds[0] = 0.130
    batcher.run("a", 99, deadline=clock[0] + 1.0)
    assert batcher.estimate("a") == pytest.approx(0.040)


def test_an_abandoned_request_waiting_for_a_slot_is_never_started():
    calls = _Calls(hold=True)
    batcher = Batcher(calls, max_batch=4, slots=1, max_wait_s=0.0)
    first, _ = _threads(batcher, [("a", 0)])
    assert calls.started.wait(5)
    gone = threading.Event()
    waiting, answers = _threads(batcher, [("a", 1)], abandoned=gone)
    time.sleep(0.05)
    gone.set()  # its caller gave up (superseded, or the client went away)
    waiting[0].join(5)
    assert isinstance(answers[1], NotStartedError), answers
    calls.release.set()
    first[0].join(5)
    assert [ps for _, ps in calls.calls] == [[0]]


def test_a_batch_that_fails_fails_each_of_its_requests():
    def boom(group, payloads):
        raise RuntimeError("device lost")

    batcher = Batcher(boom, max_batch=4, slots=1, max_wait_s=0.0)
    with pytest.raises(RuntimeError, match="device lost"):
        batcher.run("a", 1)


# The engine: batched == alone, exactly -------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """A batching engine on a tiny Snake planner (k=2 only: one option, at rungs 2, 4, 8), which
    waits long enough for concurrent requests to join one batch."""
    root = write_planner(tmp_path_factory.mktemp("ckpt"), SNAKE, budgets=(2,), simulations=(4,))
    engine = Engine.from_dir(
        root, game_ids=[SNAKE], compiler_options=FAST, max_batch=8, batch_wait_s=0.5
    )
    engine.compile()
    return engine


def _sessions(engine: Engine, n: int) -> list:
    """n different mid-game states of different sessions (random legal play from their own
    seeds)."""
    game = engine.loaded(SNAKE).planner.game
    step = jax.jit(game.step)
    states = []
    rng = np.random.default_rng(0)
    for i in range(n):
        state = game.init(jax.random.PRNGKey(100 + i))
        for _ in range(int(rng.integers(0, 6))):
            legal = np.flatnonzero(np.asarray(state.legal_action_mask))
            nxt = step(state, int(rng.choice(legal)))
            if bool(nxt.done):
                break
            state = nxt
        states.append(jax.device_get(state))
    return states


def _fields(plan) -> dict:
    return {k: v for k, v in dataclasses.asdict(plan).items() if k != "search_ms"}


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("n", [5, 3])  # rungs 8 and 4 (padded with copies)
def test_a_batched_answer_equals_the_answer_alone_exactly(engine, n):
    states = _sessions(engine, n)
    seeds = [2**63 + 17 * i for i in range(n)]  # every request its own key
    before = dict(engine.batch_stats.batches)
    answers: list = [None] * n
    barrier = threading.Barrier(n)

    def ask(i: int) -> None:
        barrier.wait()
        answers[i] = engine.plan(SNAKE, states[i], 2, seeds[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert engine.batch_stats.batches.get(n, 0) == before.get(n, 0) + 1  # one batch of all n
    alone = [engine.plan(SNAKE, states[i], 2, seeds[i]) for i in range(n)]
    assert engine.batch_stats.batches[1] >= n  # each at rung 2, beside a copy of itself
    for i in range(n):
        assert _equal(_fields(answers[i]), _fields(alone[i])), (i, answers[i], alone[i])
    # The sessions differ: their answers are not all one copied answer.
    assert len({float(a.root_value) for a in answers}) > 1


def test_a_search_that_cannot_land_in_time_is_not_started(engine):
    (state,) = _sessions(engine, 1)
    engine.plan(SNAKE, state, 2, 1)  # measured: the group's time is known
    with pytest.raises(NotStartedError, match="not started"):
        engine.plan(SNAKE, state, 2, 1, deadline=time.monotonic() + 1e-6)


def test_concurrent_plan_calls_are_batched_and_answer_as_alone(engine):
    """Over gRPC: sessions' concurrent Plan calls (each with its own state, seed and stream)
    share one batched search, and each gets the action and search value it gets alone."""
    states = _sessions(engine, 4)
    game = engine.loaded(SNAKE).planner.game
    alone = [engine.plan(SNAKE, s, 2, 40 + i) for i, s in enumerate(states)]
    before = dict(engine.batch_stats.batches)
    service = BackgroundService(engine, max_concurrent=1).start()

    async def run() -> list:
        async with grpc.aio.insecure_channel(service.address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)

            async def plan(i: int):
                request = pb.PlanRequest(
                    game_id=SNAKE,
                    state=wire.state_to_proto(game, states[i]),
                    budget=pb.Budget(k=2),
                    stream_id=f"session-{i}",
                    request_id=1,
                    seed=40 + i,
                )
                return [r async for r in stub.Plan(request, timeout=30)][-1].action

            return await asyncio.gather(*(plan(i) for i in range(len(states))))

    try:
        actions = asyncio.run(run())
    finally:
        service.stop()
    # One slot and four requests: a batch holds more than one of them.
    grown = {n: c - before.get(n, 0) for n, c in engine.batch_stats.batches.items()}
    assert any(n > 1 and c > 0 for n, c in grown.items()), grown
    for got, want in zip(actions, alone, strict=True):
        assert got.action == want.action
        assert list(got.visit_counts) == want.visit_counts.tolist()
        assert got.search_value == want.search_value  # float32 both ways: exact
