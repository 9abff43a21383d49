"""Flags that several command groups share: the seed split and a run's output folder."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_split(parser: argparse.ArgumentParser, default: str) -> None:
    """Adds `--split`: the seed range of the episodes played (planner/episodes.py `SPLITS`)."""
    parser.add_argument(
        "--split",
        choices=["eval", "tuning", "holdout"],
        default=default,
        help="seed range: eval (reported numbers only), tuning (model selection: calibration, "
        "the best fixed k) or holdout (the pre-registered evaluation, docs/preregistration.md); "
        f"default {default}",
    )


def add_out(parser: argparse.ArgumentParser, what: str) -> None:
    """Adds `--out`: the output folder, by default `out_dir`'s runs/<what>/<game>."""
    parser.add_argument("--out", default=None, help=f"output folder (default runs/{what}/<game>)")


def out_dir(args: argparse.Namespace, what: str) -> Path:
    """The output folder of a run of `what` on `args.game`: `--out`, else runs/<what>/<game>."""
    return Path(args.out or Path("runs") / what / args.game)
