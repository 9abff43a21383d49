"""Our clock-game planners against outside engines: Speed Go vs GNU Go, Speed Hex vs MCTS.

Usage:
    python -m bench.match go --opponent gnugo --level 1 [--handicap H] --games N --option K
    python -m bench.match go --opponent gnugo --games N --time-manager {proportional,gate} \
        --time-settings MAIN BYO_TIME BYO_STONES [--clock-gate F]
    python -m bench.match go --opponent mcts --rollouts R --games N --option K
    python -m bench.match hex --opponent mcts --rollouts R --games N --option K
    python -m bench.match {go,hex} --opponent planner --opponent-planner F --games N --option K

Go: the shipped Speed Go planner through `rtplan gtp --budget K` (a subprocess; no time
settings, so an unlimited clock) against GNU Go (`gnugo --mode gtp --level L --chinese-rules
--komi 7.5 --capture-all-dead`), refereed over GTP by this script: genmove to the side to move,
play to the other, until two passes or pgx's cap of 162 plies. Both engines then give their
`final_score`; GNU Go's (it judges dead stones, and captures ours before passing) decides the
game, ours (pgx's area score, no dead-stone removal) is reported beside it and a game where the
two winners differ is counted as a disagreement.

`--handicap H`: we take black with H stones on GNU Go's fixed-handicap points (white passing
in between, then a random ply each), komi still 7.5; every game is ours as black.

Go under real time controls: `--time-settings MAIN BYO_TIME BYO_STONES` (GTP's
`time_settings`: MAIN seconds of main time, then Canadian byo-yomi periods of BYO_TIME seconds
for BYO_STONES moves; `MAIN 0 0` is sudden death; whole seconds). The referee keeps a wall
clock per side: both engines get `time_settings` at each new game, the mover `time_left COLOUR
SECONDS STONES` (seconds rounded down) before each genmove, whose wall time is charged to it; a
side whose flag falls loses on time. `--opponent-time-settings` gives the opponent its own
clock (GNU Go level 1 spends 5-17 s a game on a busy 2-core machine: a short clock of ours
should not flag it). `--time-manager proportional | gate` runs `rtplan gtp
--time-manager M` (its budgets chosen per move from the clock; `--clock-gate F` names the gate,
default the one beside the planner) instead of `--budget K`; `--option K` with
`--time-settings` plays option K on every move under the same clocks. The opening's plies are
free; the table adds our mean time left at the end (+- SE), the losses on time (ours / the
opponent's) and our mean budget k per move (`rtplan-budget`, asked off the clock). Our moves
then hang on measured times, so a timed match does not repeat move for move; its openings and
colours do (`compare` pairs two time managers on them).

Go against open_spiel's `mcts.MCTSBot` on its 9x9 `go` (komi 7.5, area scoring with no
dead-stone removal and a cap of 162 plies, as pgx's): the same MCTS as for Hex, refereed over
our GTP engine; open_spiel's returns decide the game and pgx's area score is the margin. GNU Go
level 1 takes the whole board from today's planners (every game lost by 81 points), so it
cannot rank them; MCTS at 10 to 1,000 rollouts is a graded ladder below it.

Hex: the shipped Speed Hex planner in process at option K (unlimited clock, deterministic
search, as `rtplan cross-eval` plays it) against open_spiel's `mcts.MCTSBot` (UCT c=2,
`RandomRolloutEvaluator(n_rollouts=1)`, `max_simulations=R`) on open_spiel's `hex` with
board_size=11, which has no swap rule. Our game's swap (action 121, legal on the second ply
only) is never played: every game starts after a random opening of at least two plies, and our
search's root never considers swap anyway (its legal mask is cleared).

`--opponent planner`: head to head against another checkpoint of ours (`--opponent-planner`, a
shipped planner or a training run's `checkpoint.msgpack`) at `--opponent-option` (default
`--option`; with `--time-manager` and no option, the proportional time manager): Go through a
second `rtplan gtp`, Hex in process; the win rate is the first planner's.

Both sides are deterministic (ours at a fixed seed, GNU Go always, MCTS at its seed), so each
pair of games starts from a random opening of 2-4 plies seeded by the pair's index and `--seed`,
played once with each colour. Prints a table (wins, losses, win rate +- binomial SE, unique
games, the mean final margin for Go) and appends a row to bench/results/match.csv. Installs GNU
Go (`apt-get install -y gnugo`) or open_spiel (`pip install open-spiel==2.0.2`, the `bench`
extra of pyproject.toml) when missing.

`--games-csv F` also writes each game (its number, our colour, the opening, the result, every
move). `python -m bench.match compare --a A1.csv [A2.csv ...] --b B1.csv [...]` pairs two sets
of such files game by game (the same seed and game number: the same opening, our same colour)
and prints both win rates and their difference +- its paired SE: two of our planners, or two
options or time managers of one, against one opponent on the same openings (timed games: each
side's mean time left and losses on time too). `--dead-stones` (Go): GNU Go counts
the dead stones left on each final board, and says whether removing them changes the winner.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench._common import git_commit, utc_now
from bench.match._board import GO_GAME, GO_HANDICAP, HEX_GAME
from bench.match._clock import TimeControl
from bench.match._go import go_match, print_dead_stones
from bench.match._hex import hex_match
from bench.match._results import RESULTS_CSV, append_csv, compare, print_table, write_games


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.match", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="game", required=True)
    go = sub.add_parser("go", help="Speed Go (rtplan gtp) vs GNU Go, MCTS or a planner")
    go.add_argument("--opponent", choices=["gnugo", "mcts", "planner"], default="gnugo")
    go.add_argument("--level", type=int, default=1, help="GNU Go's --level (default 1)")
    go.add_argument(
        "--handicap",
        type=int,
        default=0,
        help="--opponent gnugo: we take black with this many stones (2-9; default none)",
    )
    go.add_argument(
        "--time-settings",
        type=int,
        nargs=3,
        default=None,
        metavar=("MAIN", "BYO_TIME", "BYO_STONES"),
        help="real clocks (GTP time_settings, whole seconds; MAIN 0 0 is sudden death): the "
        "referee charges each genmove's wall time, a flag's fall loses the game",
    )
    go.add_argument(
        "--opponent-time-settings",
        type=int,
        nargs=3,
        default=None,
        metavar=("MAIN", "BYO_TIME", "BYO_STONES"),
        help="the opponent's own clock (default --time-settings): e.g. enough for GNU Go never "
        "to flag, so that only our clock is short",
    )
    go.add_argument(
        "--time-manager",
        choices=("proportional", "gate"),  # rtplan gtp's (as its own flag lists them)
        default=None,
        help="rtplan gtp --time-manager (needs --time-settings; instead of --option)",
    )
    go.add_argument(
        "--clock-gate",
        "--gate",
        dest="clock_gate",
        default=None,
        help="--time-manager gate: rtplan gtp's --clock-gate (default the gate beside the planner)",
    )
    go.add_argument(
        "--max-simulations",
        type=int,
        default=None,
        help="--time-manager proportional: rtplan gtp's anytime ladder up to this many "
        "simulations (default the engine's, 16x the planner's largest search; 0: no ladder)",
    )
    go.add_argument(
        "--dead-stones",
        action="store_true",
        help="after each game, GNU Go counts the dead stones left on the board (self-play check)",
    )
    hx = sub.add_parser("hex", help="Speed Hex (in process) vs open_spiel's MCTS or a planner")
    hx.add_argument("--opponent", choices=["mcts", "planner"], default="mcts")
    for p in (go, hx):
        p.add_argument(
            "--rollouts", type=int, default=100, help="MCTSBot max_simulations (default 100)"
        )
        p.add_argument("--uct-c", type=float, default=2.0, help="MCTSBot's UCT c (default 2)")
        p.add_argument(
            "--opponent-planner", default=None, help="--opponent planner: its checkpoint"
        )
        p.add_argument(
            "--opponent-option", type=int, default=None, help="its option (default --option)"
        )
        p.add_argument("--games", type=int, required=True, help="games (even: both colours)")
        p.add_argument("--option", type=int, default=None, help="our option: a budget k")
        p.add_argument("--seed", type=int, default=0, help="openings, our search, MCTS's")
        p.add_argument("--planner", default=None, help="default checkpoints/<game>/planner.msgpack")
        p.add_argument("--csv", default=str(RESULTS_CSV), help="results CSV to append to")
        p.add_argument("--games-csv", default=None, help="also write each game to this CSV")
    cmp = sub.add_parser("compare", help="two sets of --games-csv files, paired game by game")
    cmp.add_argument("--a", type=Path, nargs="+", required=True, help="A's --games-csv files")
    cmp.add_argument("--b", type=Path, nargs="+", required=True, help="B's, the same seeds")
    return parser


def _check_clock_flags(args: argparse.Namespace) -> None:
    """Exits with a clear message on a bad mix of --option, --time-manager, --time-settings."""
    manager = getattr(args, "time_manager", None)
    times = getattr(args, "time_settings", None)
    if manager is None and args.option is None:
        raise SystemExit(
            "bench.match: --option K (or, for go, --time-manager with --time-settings)"
        )
    if manager is not None and args.option is not None:
        raise SystemExit("bench.match: --option plays one budget on every move: no --time-manager")
    if manager is not None and times is None:
        raise SystemExit(
            "bench.match: --time-manager spends a clock: give it --time-settings MAIN BYO STONES"
        )
    if getattr(args, "clock_gate", None) and manager != "gate":
        raise SystemExit("bench.match: --clock-gate is the gate's: it needs --time-manager gate")
    ladder = getattr(args, "max_simulations", None)
    if ladder is not None and manager != "proportional":
        raise SystemExit(
            "bench.match: --max-simulations is the ladder the proportional time manager spends: "
            "it needs --time-manager proportional"
        )
    if ladder is not None and ladder < 0:
        raise SystemExit(f"bench.match: --max-simulations must be >= 0, got {ladder}")
    theirs = getattr(args, "opponent_time_settings", None)
    if theirs is not None and times is None:
        raise SystemExit("bench.match: --opponent-time-settings needs --time-settings (ours)")
    for flag, values in (("--time-settings", times), ("--opponent-time-settings", theirs)):
        if values is not None:
            try:
                TimeControl(*values)
            except ValueError as e:
                raise SystemExit(f"bench.match: {flag} {' '.join(map(str, values))}: {e}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.game == "compare":
        compare(args.a, args.b)
        return 0
    handicap = getattr(args, "handicap", 0)
    if handicap and (args.opponent != "gnugo" or handicap not in GO_HANDICAP):
        raise SystemExit("bench.match: --handicap is 2 to 9 stones, against --opponent gnugo")
    if not handicap and (args.games < 2 or args.games % 2):
        raise SystemExit(
            "bench.match: --games must be even (each opening is played by both colours)"
        )
    if handicap and args.games < 1:
        raise SystemExit("bench.match: --games must be at least 1")
    if args.opponent == "planner" and args.opponent_planner is None:
        raise SystemExit("bench.match: --opponent planner needs --opponent-planner")
    _check_clock_flags(args)
    if args.opponent_option is None:
        args.opponent_option = args.option
    results, settings = (go_match if args.game == "go" else hex_match)(args)
    game = GO_GAME if args.game == "go" else HEX_GAME
    manager = getattr(args, "time_manager", None)
    if manager and getattr(args, "max_simulations", None) is not None:
        manager += f" ladder {args.max_simulations}"  # the results' name of the manager
    ours = f"option {args.option}"
    if getattr(args, "time_manager", None):
        ours = f"time manager {args.time_manager}"
        if getattr(args, "max_simulations", None) is not None:
            ours += f" (ladder to {args.max_simulations} simulations)"
        if args.clock_gate:
            ours += f" (clock gate {args.clock_gate})"
    if args.opponent == "gnugo":
        opponent = f"gnugo level {args.level}" + (f" handicap {handicap}" if handicap else "")
    elif args.opponent == "mcts":
        opponent = f"open_spiel mcts {args.rollouts} rollouts"
    else:
        opponent = f"planner {args.opponent_planner}"
    title = f"{game} {ours} vs {opponent} ({settings}), seed {args.seed}:"
    summary = print_table(title, results)
    print_dead_stones(results)
    argv = list(argv if argv is not None else sys.argv[1:])
    command = " ".join(["python", "-m", "bench.match", *argv])
    row = {
        "date": utc_now(),
        "commit": git_commit(),
        "command": command,
        "game": game,
        # A timed match at a time manager: its name where the fixed option goes.
        "option": args.option if args.option is not None else manager,
        "opponent": opponent,
        "settings": settings,
        "seed": args.seed,
        **summary,
    }
    row["wins"] = f"{row['wins']:g}"
    for key in ("win_rate", "se", "margin", "margin_rtplan"):
        if row[key] is not None:
            row[key] = round(row[key], 4)
    append_csv(Path(args.csv), row)
    print(f"appended to {args.csv}")
    if args.games_csv:
        timed = {}
        if getattr(args, "time_settings", None):
            settings = " ".join(map(str, args.time_settings))
            if args.opponent_time_settings not in (None, args.time_settings):
                settings += f" vs {' '.join(map(str, args.opponent_time_settings))}"
            timed = {
                "time_manager": manager or f"option {args.option}",
                "time_settings": settings,
            }
        write_games(Path(args.games_csv), args.seed, results, **timed)
        print(f"games written to {args.games_csv}")
    return 0
