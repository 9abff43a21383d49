"""Replay commands: `replay-gif` (a replay file as an animated GIF)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `replay-gif` to the `rtplan` subcommands."""
    gif = sub.add_parser(
        "replay-gif",
        help="a replay file re-simulated and written as an animated GIF: each frame's board and "
        "a strip of the chosen k and the planner's value",
    )
    gif.add_argument("replay", help="a replay file (JSON lines, as the env server records them)")
    gif.add_argument("--out", default=None, help="the GIF to write (default: REPLAY with .gif)")
    gif.add_argument(
        "--fps",
        type=float,
        default=None,
        help="GIF frames per second (default: the recorded FPS / --every: the recorded speed)",
    )
    gif.add_argument("--every", type=int, default=1, help="show every n-th frame (default: 1)")
    gif.add_argument(
        "--max-frames", type=int, default=None, help="show at most this many (default: all)"
    )
    gif.set_defaults(handler=_replay_gif)


def _replay_gif(args: argparse.Namespace) -> int:
    from rtplan.server.replay_gif import write_gif  # JAX: only once the command runs

    out = Path(args.out) if args.out else Path(args.replay).with_suffix(".gif")
    frames = write_gif(args.replay, out, fps=args.fps, every=args.every, max_frames=args.max_frames)
    print(f"wrote {out}: {frames} frames")
    return 0
