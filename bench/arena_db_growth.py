"""How much the arena's database grows per ranked episode (SQLite, the embedded default).

Usage: python -m bench.arena_db_growth [--runs 50]

Registers `--runs` agent versions, enters each in a run of the `ranked-v1` set and commits its
20 episodes as finished, through the repository the arena uses, with values the size of real
ones (a 21-bin share histogram, an env server URL, a session id, a replay name); then prints the
file's growth per episode (the write-ahead log checkpointed into the file first).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile

from rtplan.arena import ranked
from rtplan.arena.agents import Agents
from rtplan.arena.repository import Repository

HIST = [3, 8, 20, 30, 40, 30, 20, 10, 5, 4, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 5]


def _size(db: str) -> int:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    seeds = ranked.SEED_SETS["ranked-v1"]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/arena.db"
        repo = Repository.open(db)
        agents = Agents(repo)
        before, episodes = _size(db), 0
        for r in range(args.runs):
            version, _ = agents.register(f"agent-{r}", "1")
            run = repo.create_run(
                version.id, game_id="tetris-rt-v0", tier="standard", fps=9.0,
                seed_set=seeds.name, episodes_planned=seeds.episodes,
                seed_order=ranked.seed_order(seeds),
            )  # fmt: skip
            for i, seed in enumerate(run.seed_order):
                attempt = repo.start_attempt(run.id, i, 1, seed)
                sid = f"{r:04d}{i:04d}0123456789ab"
                repo.place_attempt(attempt.id, env_server="http://env-3.lab:8000", session_id=sid)
                repo.end_attempt(
                    attempt.id, "finished", outcome="max_frames", episode_return=123.5,
                    frames=200, on_time=180, late=5, fallback=10, invalid=5,
                    slack_median_ms=80.2, slack_p5_ms=12.3, frame_share_mean=0.27,
                    frame_share_hist=HIST, replay=f"tetris-rt-v0_{sid}.jsonl", note=None,
                )  # fmt: skip
                episodes += 1
        grown = _size(db) - before
        repo.close()
    print(
        f"{episodes} episodes of {args.runs} runs: the SQLite file grew {grown / 1024:.0f} KiB, "
        f"{grown / episodes:.0f} bytes per episode (agents and runs included)"
    )


if __name__ == "__main__":
    main()
