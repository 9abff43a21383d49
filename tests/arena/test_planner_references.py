"""The planner's fixed budgets as reference rows: the arena enters them through the same path
as the policy-only player (an env server's session whose agent is the planner, at budget k,
reached over the planner service), on the same seeds, paired on the board."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rtplan.arena import ArenaSettings, Repository, create_app, ranked
from support import ROOT, env_server, start_planner, uvicorn_app, write_planner

GAME = "snake-rt-v0"
SMOKE = ranked.SEED_SETS["smoke"]


def _get(base: str, path: str) -> dict:
    from rtplan.processes import http_json

    return http_json("GET", f"{base}{path}")


@pytest.mark.slow
def test_fixed_budget_references_play_through_the_planner_service(tmp_path):
    root = write_planner(tmp_path / "ckpt", GAME, budgets=(1, 2), simulations=(2, 4))
    planner = start_planner(root)
    db = str(tmp_path / "arena.db")
    repository = Repository.open(db)
    try:
        with env_server(tmp_path, root, (GAME,), "--planner-address", planner.address) as env:
            settings = ArenaSettings(database=db, port=0, env=env, seed_set="smoke")
            with uvicorn_app(create_app(settings, repository=repository)) as arena:
                refs = subprocess.run(
                    [sys.executable, "-m", "rtplan", "arena", "references", "--game", GAME,
                     "--tier", "fast", "--players", "policy-only,k1,k2"],
                    env=dict(os.environ, RTPLAN_ARENA_URL=arena), capture_output=True,
                    text=True, timeout=600, cwd=ROOT,
                )  # fmt: skip
                assert refs.returncode == 0, refs.stdout + refs.stderr
                runs = _get(arena, f"/v1/runs?game={GAME}&tier=fast")["runs"]
                board = _get(arena, f"/v1/leaderboard?game={GAME}&tier=fast&seed_set=smoke")
    finally:
        planner.stop()
        repository.close()
    by_agent = {r["agent"]: r for r in runs}
    assert set(by_agent) == {"rtplan-policy-only", "rtplan-k1", "rtplan-k2"}
    seeds = {}
    for name, run in by_agent.items():
        assert run["status"] == "finished" and run["kind"] == "reference", run
        played = [e for e in run["episodes"] if e["status"] == "finished"]
        assert len(played) == SMOKE.episodes
        seeds[name] = sorted(e["seed"] for e in played)
        # Each frame's action is accounted for: on time, late, the fallback or invalid.
        for e in played:
            t = e["timing"]
            assert t["on_time"] + t["late"] + t["fallback"] + t["invalid"] == e["frames"] > 0
    assert all(s == list(SMOKE.seeds) for s in seeds.values())  # the same seeds: paired
    rows = {r["agent"]: r for r in board["rows"]}
    assert set(rows) == set(by_agent)
    best = max(rows.values(), key=lambda r: r["mean_return"])
    assert best["vs_best_reference"] is None
