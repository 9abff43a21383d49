"""The ranked runs' rules (arena/ranked.py, arena/standings.py): seeds apart from every other
evaluation, the games the env server calls real-time, each run's own order, the players, and
the leaderboard's statistics."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from rtplan import games
from rtplan.arena import ranked
from rtplan.arena.records import EpisodeRecord, RunRecord
from rtplan.arena.standings import _quantile, board, timing
from rtplan.planner.episodes import SEED_RANGES

NOW = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)


def test_the_arena_s_seeds_are_apart_from_every_other_split_and_each_other():
    for name, seeds in SEED_RANGES.items():
        assert ranked.SEED_RANGE.start >= seeds.stop or ranked.SEED_RANGE.stop <= seeds.start, name
    taken: set[int] = set()
    for seed_set in ranked.SEED_SETS.values():
        seeds = set(seed_set.seeds)
        assert seeds <= set(ranked.SEED_RANGE) and not seeds & taken, seed_set.name
        taken |= seeds
    # The leaderboard's: 20 episodes of at most 200 frames (a standard run within 7.4 minutes).
    v1 = ranked.SEED_SETS["ranked-v1"]
    assert (v1.first_seed, v1.episodes, v1.max_frames) == (3_000_000, 20, 200)
    assert v1.episodes * v1.max_frames / ranked.TIERS["standard"].fps <= 7.5 * 60


def test_ranked_games_are_the_real_time_games():
    real_time = {g for g in games.registered_games() if games.kind_of(g) is not games.Kind.CLOCK}
    assert set(ranked.GAMES) == real_time


def test_each_run_draws_its_own_order_of_the_same_seeds():
    v1 = ranked.SEED_SETS["ranked-v1"]
    orders = [tuple(ranked.seed_order(v1)) for _ in range(8)]
    assert all(sorted(o) == list(v1.seeds) for o in orders)
    assert len(set(orders)) > 1  # 20! orders: eight draws all equal would be a bug


def test_reference_players_are_the_env_server_s_built_in_agents():
    assert ranked.player_session("policy-only") == {"agent": "reflex"}
    assert ranked.player_session("gate") == {"agent": "planner"}
    assert ranked.player_session("k3") == {"agent": "planner", "k": 3}
    with pytest.raises(ValueError, match="no reference player"):
        ranked.player_session("k5")
    assert ranked.next_episode(3, {0, 2}) == 1 and ranked.next_episode(2, {0, 1}) is None


def _episode(run_id: int, index: int, seed: int, ret: float, **timing) -> EpisodeRecord:
    fields = dict(on_time=10, late=0, fallback=0, invalid=0, slack_median_ms=None,
                  slack_p5_ms=None, frame_share_mean=None, frame_share_hist=None)  # fmt: skip
    return EpisodeRecord(
        id=run_id * 100 + index, run_id=run_id, episode_index=index, attempt=1, seed=seed,
        status="finished", note=None, outcome="max_frames", episode_return=ret, frames=10,
        env_server=None, session_id=None, replay=None, started_at=NOW, finished_at=NOW,
        **{**fields, **timing},
    )  # fmt: skip


def _run(run_id: int, agent: str, kind: str, returns: dict[int, float], order) -> RunRecord:
    attempts = tuple(_episode(run_id, i, s, returns[s]) for i, s in enumerate(order))
    return RunRecord(
        id=run_id, agent_version_id=run_id, agent=agent, agent_kind=kind, version="1",
        game_id="tetris-rt-v0", tier="standard", fps=9.0, seed_set="smoke",
        episodes_planned=len(order), player=None, seed_order=tuple(order), status="finished",
        created_at=NOW, updated_at=NOW, finished_at=NOW, attempts=attempts,
    )  # fmt: skip


def test_the_board_pairs_by_seed_whatever_order_each_run_played():
    seeds = [10, 11, 12, 13]
    ref = {10: 5.0, 11: 1.0, 12: 9.0, 13: 3.0}
    weak = {10: 0.0, 11: 0.0, 12: 0.0, 13: 0.0}
    agent = {s: ref[s] + d for s, d in zip(seeds, (1.0, 2.0, 1.0, 2.0), strict=True)}
    rows = board([
        _run(1, "rtplan-k1", "reference", ref, seeds),
        _run(2, "rtplan-policy-only", "reference", weak, seeds[::-1]),
        _run(3, "mine", "agent", agent, [12, 10, 13, 11]),
    ])  # fmt: skip
    assert [r.run.agent for r in rows] == ["mine", "rtplan-k1", "rtplan-policy-only"]
    mine = rows[0]
    # Paired by seed: the differences are 1, 2, 1, 2 (mean 1.5, SE 0.5/sqrt(4)*sqrt(4/3)).
    assert mine.vs_best == pytest.approx((1.5, np.std([1, 2, 1, 2], ddof=1) / 2))
    assert mine.best_reference == "rtplan-k1 1" and rows[1].vs_best is None
    assert rows[2].vs_best[0] == pytest.approx(-4.5)


def test_slack_quantiles_come_from_the_summed_histograms():
    counts = np.zeros(21)
    counts[[2, 18]] = 50  # half the answers used 10-15% of the frame, half 90-95%
    assert _quantile(counts, 0.5) == pytest.approx(0.15)
    assert _quantile(counts, 0.95) == pytest.approx(0.945)  # 0.9 of the way through bin 18
    hist_a, hist_b = [0] * 21, [0] * 21
    hist_a[2], hist_b[18] = 50, 50
    eps = [
        _episode(1, 0, 1, 0.0, frame_share_hist=tuple(hist_a), frame_share_mean=0.125),
        _episode(1, 1, 2, 0.0, frame_share_hist=tuple(hist_b), frame_share_mean=0.925),
    ]
    t = timing(eps, fps=10.0)  # a 100 ms frame
    assert t.slack_median_ms == pytest.approx(85.0) and t.slack_p5_ms == pytest.approx(5.5)
    assert t.frame_share_mean == pytest.approx(0.525) and t.on_time == 1.0


def test_the_arena_presents_the_first_key_of_its_env_key_file(tmp_path):
    """What the env servers ask of whoever creates sessions: `--env-key-file`'s first key (the
    compose file gives the arena the env server's own key file), sent as a bearer token."""
    import asyncio

    from fastapi import FastAPI, Header

    from rtplan.arena.app import env_key
    from rtplan.arena.envs import EnvServers
    from rtplan.arena.settings import ArenaSettings
    from support import uvicorn_app

    keys = tmp_path / "api_keys"
    keys.write_text(
        "# rotated 2026-12-07\nfirst-key-0123456789abcdef\nsecond-key-0123456789abcdef\n"
    )
    settings = ArenaSettings(database=str(tmp_path / "a.db"), env_key_file=keys)
    assert env_key(settings) == "first-key-0123456789abcdef"
    assert "first-key" not in repr(settings) + str(settings)
    seen = []
    app = FastAPI()

    @app.post("/v1/sessions", status_code=201)
    def create(authorization: str | None = Header(None)) -> dict:
        seen.append(authorization)
        return {"id": "s1", "token": "t", "grpc_port": 50052, "session": {}}

    with uvicorn_app(app) as base:
        server, answer = asyncio.run(EnvServers([base], env_key(settings)).create({"game": "x"}))
    assert seen == ["Bearer first-key-0123456789abcdef"] and server.grpc == "127.0.0.1:50052"


def test_rate_limits_answer_429_with_retry_after_per_address_registration_and_token(tmp_path):
    from fastapi.testclient import TestClient

    from rtplan.arena.app import create_app
    from rtplan.arena.settings import ArenaSettings

    settings = ArenaSettings(
        database=str(tmp_path / "a.db"),
        rate_per_address="10/minute",
        rate_registrations="2/hour",
        rate_per_token="3/minute",
    )
    with TestClient(create_app(settings)) as client:
        tokens = [
            client.post("/v1/agents", json={"name": f"a{i}", "version": "1"}).json()["token"]
            for i in range(2)
        ]
        third = client.post("/v1/agents", json={"name": "a2", "version": "1"})
        assert third.status_code == 429 and third.json()["error"] == "rate_limited"
        assert "registrations from this address" in third.json()["detail"]
        assert 0 < int(third.headers["Retry-After"]) <= 3600
        auth = {"Authorization": f"Bearer {tokens[0]}"}
        for _ in range(3):
            assert client.get("/v1/runs/1", headers=auth).status_code == 404  # not counted
            client.post("/v1/runs", json={"game": "nope"}, headers=auth)  # counted
        over = client.post("/v1/runs", json={"game": "nope"}, headers=auth)
        assert over.status_code == 429 and "calls with this token" in over.json()["detail"]
        # Another token has its own count; this address has spent its 10 requests by now.
        other = {"Authorization": f"Bearer {tokens[1]}"}
        last = client.post("/v1/runs", json={"game": "nope"}, headers=other)
        assert last.status_code == 429 and "requests from this address" in last.json()["detail"]
    with TestClient(create_app(settings)) as client:  # a new arena process: new counts
        assert [a["name"] for a in client.get("/v1/agents").json()["agents"]] == ["a0", "a1"]
