"""Speed Go matches: `rtplan gtp` against GNU Go, open_spiel's MCTS or another planner."""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Sequence

from bench.match._board import (
    GO_GAME,
    GO_MAX_PLIES,
    GO_OPENING_POINTS,
    GO_SIZE,
    KOMI,
    go_vertex,
    handicap_opening,
    parse_score,
    random_opening,
)
from bench.match._clock import TimeControl
from bench.match._engines import SpielGo, gtp_planner_argv, mcts_settings
from bench.match._gtp import GtpPlayer, GtpProcess, RtplanPlayer
from bench.match._install import checkpoint, ensure_gnugo, ensure_open_spiel
from bench.match._referee import referee
from bench.match._results import Result, fmt_margin, sign_of


def judge_dead_stones(judge: GtpProcess, result: Result, *, replay: bool) -> None:
    """Sets `result.dead` and `result.dead_verdict` from GNU Go's view of the final board
    (`final_status_list dead`, and `final_score`, which removes those stones). `replay`: the
    judge did not play the game, so it replays the moves first."""
    if replay:
        judge.send("clear_board")
        for ply, move in enumerate(result.record.moves):
            judge.send(f"play {'bw'[ply % 2]} {move}")
    dead = judge.send("final_status_list dead").split()
    colours = [judge.send(f"color {v}").strip().lower() for v in dead]
    result.dead = (colours.count("black"), colours.count("white"))
    sign = 1.0 if result.colour == 0 else -1.0
    result.dead_verdict = sign * sign_of(parse_score(judge.send("final_score")))


def print_dead_stones(results: Sequence[Result]) -> None:
    """`--dead-stones`: how many games ended with dead stones on the board, and in how many
    GNU Go's winner (dead stones removed) differs from the game's own."""
    judged = [r for r in results if r.dead is not None]
    if not judged:
        return
    left = [r for r in judged if sum(r.dead) > 0]
    flipped = [r for r in judged if (r.dead_verdict + 1.0) / 2.0 != r.score]
    print(
        f"dead stones on the final board (GNU Go's final_status_list dead): {len(left)} of "
        f"{len(judged)} games, {sum(r.dead[0] for r in judged)} black and "
        f"{sum(r.dead[1] for r in judged)} white stones in all; GNU Go's winner differs in "
        f"{len(flipped)} of {len(judged)}"
    )


def go_match(args: argparse.Namespace) -> tuple[list[Result], str]:
    """`--games` games of `rtplan gtp --budget K` (or `--time-manager M`) against
    `--opponent`; (results, settings).

    The opponent judges the game: GNU Go's `final_score` (it removes dead stones), open_spiel's
    returns, or the other planner's `final_score`. Ours (pgx's area score) is the second margin,
    and a game whose two winners differ counts as a disagreement. `--time-settings`: the
    referee keeps both clocks (`referee`'s `time`), and a loss on time decides the game.
    """
    planner = checkpoint(GO_GAME, args.planner)
    control = TimeControl(*args.time_settings) if args.time_settings else None
    theirs_control = control
    if args.opponent_time_settings:
        theirs_control = TimeControl(*args.opponent_time_settings)
    ours_cmd = gtp_planner_argv(
        planner,
        args.option,
        args.seed,
        time_manager=args.time_manager,
        clock_gate=args.clock_gate,
        max_simulations=args.max_simulations,
    )
    log = tempfile.NamedTemporaryFile("w", prefix="match-rtplan-gtp-", suffix=".log", delete=False)  # noqa: SIM115
    print(f"rtplan gtp: {' '.join(map(str, ours_cmd))} (log {log.name})")
    with contextlib.ExitStack() as stack:
        stack.enter_context(log)
        ours = stack.enter_context(GtpProcess(ours_cmd, name="rtplan", stderr=log))
        engines = [ours]
        if args.opponent == "mcts":
            ensure_open_spiel()
            theirs = SpielGo(args.rollouts, seed=args.seed, uct_c=args.uct_c)
            settings = mcts_settings(args, "board_size=9 komi=7.5")

            def judge() -> tuple[float, float | None]:
                return theirs.black_result(), None
        else:
            if args.opponent == "gnugo":
                cmd = [ensure_gnugo(), "--mode", "gtp", "--level", args.level, "--chinese-rules"]
                cmd += ["--komi", KOMI, "--capture-all-dead"]
                settings = f"level={args.level} chinese-rules komi={KOMI} capture-all-dead"
                if args.handicap:
                    settings += f" handicap={args.handicap} (we take black; stones played)"
            else:
                other = checkpoint(GO_GAME, args.opponent_planner)
                cmd = gtp_planner_argv(other, args.opponent_option, args.seed)
                settings = f"{other} option {args.opponent_option}"
            opponent = stack.enter_context(GtpProcess(cmd, name=args.opponent, stderr=log))
            engines.append(opponent)
            if args.opponent == "gnugo":
                # GNU Go seeds its move choice from the clock: fixed, a match repeats.
                opponent.send(f"set_random_seed {args.seed}")
                settings += f" random_seed={args.seed}"
            theirs = GtpPlayer(opponent)
            print(f"{args.opponent}: {' '.join(map(str, cmd))}")

            def judge() -> tuple[float, float | None]:
                margin = parse_score(opponent.send("final_score"))
                return sign_of(margin), margin

        dead_judge = None
        if args.dead_stones:
            if args.opponent == "gnugo":
                dead_judge = opponent  # it played the game: no replay
            else:
                cmd = [ensure_gnugo(), "--mode", "gtp", "--chinese-rules", "--komi", KOMI]
                dead_judge = stack.enter_context(GtpProcess(cmd, name="gnugo judge", stderr=log))
                engines.append(dead_judge)
        for engine in engines:
            print(f"{engine.name}: version {engine.send('version')}")
            engine.send(f"boardsize {GO_SIZE}")
            engine.send(f"komi {KOMI}")
        results, voided = [], 0
        for i in range(args.games):
            if args.handicap:
                colour, opening = 0, handicap_opening(args.handicap, i, seed=args.seed)
            else:
                colour = i % 2
                points = random_opening(i // 2, GO_OPENING_POINTS, seed=args.seed)
                opening = [go_vertex(p) for p in points]
            us = RtplanPlayer(ours)
            black, white = (us, theirs)[:: 1 if colour == 0 else -1]
            timed = None if control is None else (control, theirs_control)[:: 1 - 2 * colour]
            start = time.perf_counter()
            record = referee(black, white, opening, max_plies=GO_MAX_PLIES, time=timed)
            took = time.perf_counter() - start
            sign = 1.0 if colour == 0 else -1.0
            ours_score = ours.send("final_score")
            margin_ours = sign * parse_score(ours_score)
            if record.resigned is not None:
                score = 0.0 if record.resigned == colour else 1.0
                margin = margin_ours = None
                disagree = False
                verdict = f"{'bw'[record.resigned]} resigned"
            elif record.lost_on_time is not None:
                score = 0.0 if record.lost_on_time == colour else 1.0
                margin = margin_ours = None
                disagree = False
                verdict = f"{'bw'[record.lost_on_time]} lost on time"
            else:
                if record.end.startswith("refused"):
                    # The two rule sets disagree on a move's legality. Against open_spiel go: a
                    # move repeating an earlier position, which `rtplan gtp` refuses (pgx: a loss
                    # for the mover) and open_spiel scores a draw (the one difference:
                    # tests/bench/test_bench_match.py). Void: counts for neither side.
                    voided += 1
                    print(
                        f"game {i + 1}/{args.games}: void, {record.end}; moves "
                        f"{' '.join(record.moves)}",
                        flush=True,
                    )
                    continue
                result, margin = judge()
                result *= sign
                margin = None if margin is None else sign * margin
                score = (result + 1.0) / 2.0
                disagree = sign_of(margin_ours) != result
                verdict = f"{args.opponent}'s verdict {result:+g}, margin {fmt_margin(margin)}"
            result = Result(colour, score, record, margin, margin_ours, disagree, i + 1)
            if us.budgets:
                result.mean_k = statistics.fmean(us.budgets)
            if control is not None:
                verdict += "; " + clocks_text(result)
            if dead_judge is not None and record.resigned is None and record.lost_on_time is None:
                judge_dead_stones(dead_judge, result, replay=args.opponent != "gnugo")
                verdict += (
                    f"; GNU Go: {result.dead[0]} black, {result.dead[1]} white stones dead, "
                    f"its verdict {result.dead_verdict:+g}"
                )
            results.append(result)
            print(
                f"game {i + 1}/{args.games}: we play {'black' if colour == 0 else 'white'}, "
                f"opening {' '.join(opening)}, {len(record.moves)} plies in {took:.0f} s, "
                f"{record.end}; "
                f"{verdict}, ours {ours_score}: "
                f"{'win' if score == 1 else 'loss' if score == 0 else 'tie'}"
                f"{' (scores disagree)' if disagree else ''}",
                flush=True,
            )
    if control is not None:
        settings += f" time_settings={control.gtp}"
        if theirs_control != control:
            settings += f" (the opponent's {theirs_control.gtp})"
    if voided:
        settings += f" voided={voided} (a move one engine refused)"
    return results, settings


def clocks_text(result: Result) -> str:
    """A timed game's clocks for its printed line: time left each side, our mean k and move."""
    k = "" if result.mean_k is None else f", our mean k {result.mean_k:.1f}"
    move_s = result.move_seconds()
    per_move = "" if move_s is None else f", our mean move {move_s:.3f} s"
    return (
        f"time left ours {result.time_left(0):.1f} s, theirs {result.time_left(1):.1f} s"
        f"{k}{per_move}"
    )
