"""A custom agent for rtplan: plays uniformly random legal actions through the gRPC Env API.

Usage (with an env server running, e.g. `rtplan demo` or `rtplan env-server`), from any
directory, in a checkout or an installed package:
    python -m rtplan.examples.random_agent --address localhost:50052 --game snake-rt-v0
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence

import numpy as np

from rtplan.client import EnvClient


def main(argv: Sequence[str] | None = None) -> int:
    """Plays one session to its end (or `--max-frames`), printing a summary; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="localhost:50052", help="env server gRPC address")
    parser.add_argument("--game", default="snake-rt-v0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fps", type=float, default=0.0, help="0: the server's default")
    parser.add_argument("--clock", default="real_time", choices=["real_time", "simulated"])
    parser.add_argument("--max-frames", type=int, default=0, help="0: play to the end")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    provenance = collections.Counter()
    with (
        EnvClient(args.address) as client,
        client.play(args.game, seed=args.seed, fps=args.fps, clock=args.clock) as episode,
    ):
        print(f"joined session {episode.session_id}: {args.game} at {episode.handshake.fps} FPS")
        for frame in episode:
            if frame.previous is not None:
                provenance[frame.previous.provenance] += 1
            if frame.late:  # frames reported "fallback" whose action came after all
                provenance["fallback"] -= len(frame.late)
                provenance["late"] += len(frame.late)
            if frame.done or (args.max_frames and frame.frame >= args.max_frames):
                break
            legal = np.flatnonzero(frame.legal_action_mask)
            episode.act(frame.frame, int(rng.choice(legal)))
        print(f"frames {frame.frame}, return {frame.episode_return:.1f}")
        print(f"how the frames chose their actions: {dict(provenance)}")
        for code, message in episode.errors:
            print(f"server said ({code}): {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
