"""Flags that several command groups share: the seed split, a run's output folder, and the checks
of the planner's rules (`--committed`, `--tree-k`) and budgets (`--budgets`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rtplan.commands._errors import CommandError


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


def check_rules(args: argparse.Namespace, *, clock: bool) -> None:
    """The checks of `--committed` and `--tree-k` (the planner's rules) that every command
    taking them makes (`eval`, `counterfactual`, `train-gate`): a plan and a tree are for the
    committed-action games (`clock`: `args.game` is a clock game), and tree_k is >= 0.

    Raises:
        CommandError: the first check that fails.
    """
    if args.committed == "plan" and clock:
        raise CommandError(
            f"--committed plan is for committed-action games: {args.game} is a clock game, "
            "whose options have no committed frames"
        )
    if args.tree_k is not None:
        if clock:
            raise CommandError(
                f"--tree-k is for committed-action games: {args.game} is a clock game, whose "
                "moves are one frame each"
            )
        if args.tree_k < 0:
            raise CommandError(f"--tree-k must be >= 0, got {args.tree_k}")


def add_budgets(parser: argparse.ArgumentParser, what: str) -> None:
    """Adds `--budgets` (`planner.configs.with_budgets`'s), its help ended by `what` the
    command does with them."""
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        default=None,
        metavar="K",
        help="committed games: the budgets the planner plays, the checkpoint's and larger ones, "
        "each new k searching at the checkpoint's simulations per frame (32: k8 searches 256) "
        f"{what}",
    )


def check_budgets(args: argparse.Namespace, *, clock: bool) -> None:
    """The check of `--budgets` that every command taking it makes (`eval`, `counterfactual`,
    `train-gate`, `fit-gate`): more budgets are for the committed-action games (`clock`:
    `args.game` is a clock game); the budgets themselves are `planner.configs.with_budgets`'s to
    check against the planner checkpoint.

    Raises:
        CommandError: `--budgets` on a clock game.
    """
    if getattr(args, "budgets", None) is not None and clock:
        raise CommandError(
            f"--budgets is for committed-action games: {args.game} is a clock game, whose "
            "budgets are its planner's simulation counts"
        )
