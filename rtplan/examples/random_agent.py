"""A custom agent for rtplan: plays uniformly random legal actions through the gRPC Env API.

Usage (with an env server running, e.g. `rtplan demo` or `rtplan env-server`), from any
directory, in a checkout or an installed package:
    python -m rtplan.examples.random_agent --address localhost:50052 --game snake-rt-v0

In the arena's ranked run of a game (docs/arena.md), with the token `rtplan arena register`
printed in $RTPLAN_ARENA_TOKEN:
    python -m rtplan.examples.random_agent --ranked --arena http://127.0.0.1:8100 \\
        --game tetris-rt-v0
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from collections.abc import Sequence

import numpy as np

from rtplan.client import ArenaError, EnvClient, ranked_run

#: Where `--ranked` reads the agent version's token (a token on a command line shows in `ps`).
TOKEN_ENV = "RTPLAN_ARENA_TOKEN"


def play(episode, rng: np.random.Generator, max_frames: int = 0):
    """Answers every frame of `episode` with a random legal action until it ends (or
    `max_frames`); returns (how the frames chose their actions, the last frame)."""
    provenance: collections.Counter = collections.Counter()
    frame = None
    for frame in episode:
        if frame.previous is not None:
            provenance[frame.previous.provenance] += 1
        if frame.late:  # frames reported "fallback" whose action came after all
            provenance["fallback"] -= len(frame.late)
            provenance["late"] += len(frame.late)
        if frame.done or (max_frames and frame.frame >= max_frames):
            break
        legal = np.flatnonzero(frame.legal_action_mask)
        episode.act(frame.frame, int(rng.choice(legal)))
    return provenance, frame


def main(argv: Sequence[str] | None = None) -> int:
    """Plays one session to its end (or `--max-frames`), or with `--ranked` a whole ranked
    run, printing a summary; returns 0 (1: the arena refused)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="localhost:50052", help="env server gRPC address")
    parser.add_argument("--game", default="snake-rt-v0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fps", type=float, default=0.0, help="0: the server's default")
    parser.add_argument("--clock", default="real_time", choices=["real_time", "simulated"])
    parser.add_argument("--max-frames", type=int, default=0, help="0: play to the end")
    parser.add_argument(
        "--ranked",
        action="store_true",
        help=f"play the arena's ranked run of --game (the token in ${TOKEN_ENV})",
    )
    parser.add_argument("--arena", default="http://127.0.0.1:8100", help="the arena's URL")
    parser.add_argument("--tier", default="standard", choices=["standard", "fast"])
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    if args.ranked:
        return _ranked(args, rng)
    with (
        EnvClient(args.address) as client,
        client.play(args.game, seed=args.seed, fps=args.fps, clock=args.clock) as episode,
    ):
        print(f"joined session {episode.session_id}: {args.game} at {episode.handshake.fps} FPS")
        provenance, last = play(episode, rng, args.max_frames)
        if last is not None:
            print(f"frames {last.frame}, return {last.episode_return:.1f}")
        print(f"how the frames chose their actions: {dict(provenance)}")
        for code, message in episode.errors:
            print(f"server said ({code}): {message}")
    return 0


def _ranked(args: argparse.Namespace, rng: np.random.Generator) -> int:
    token = os.environ.get(TOKEN_ENV)
    if not token:
        print(f"--ranked needs the agent version's token in ${TOKEN_ENV}", file=sys.stderr)
        return 1

    def done(assignment: dict, run: dict) -> None:
        played = [e for e in run["episodes"] if e["status"] == "finished"]
        last = f", last return {played[-1]['episode_return']:g}" if played else ""
        print(f"episode {assignment['episode'] + 1}/{assignment['of']} played{last}", flush=True)

    try:
        run = ranked_run(
            args.arena,
            token,
            args.game,
            lambda episode, _: play(episode, rng),
            tier=args.tier,
            on_episode=done,
        )
    except ArenaError as e:
        print(f"the arena refused: {e}", file=sys.stderr)
        return 1
    print(
        f"run {run['id']} {run['status']}: {run['episodes_finished']} episodes, mean return "
        f"{run['mean_return']:.2f} +- {run['se_return']:.2f} (see {args.arena}/arena)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
