"""Speed Hex matches: our planner in process against open_spiel's MCTS or another planner."""

from __future__ import annotations

import argparse

from bench.match._board import HEX_CELLS, HEX_GAME, hex_cell_name, random_opening
from bench.match._engines import OurHex, SpielHex, mcts_settings
from bench.match._install import checkpoint, ensure_open_spiel
from bench.match._referee import referee
from bench.match._results import Result


def hex_match(args: argparse.Namespace) -> tuple[list[Result], str]:
    """`--games` games of our Speed Hex option against `--opponent`; (results, settings)."""
    from rtplan.jax_setup import use_compile_cache

    use_compile_cache()  # before JAX starts: the options compile once across runs
    planner = checkpoint(HEX_GAME, args.planner)
    ours = OurHex(planner, args.option, seed=args.seed)
    if args.opponent == "mcts":
        ensure_open_spiel()
        theirs = SpielHex(args.rollouts, seed=args.seed, uct_c=args.uct_c)
        settings = mcts_settings(args, "board_size=11 no swap")
        print(f"our planner {planner} at option {args.option}; open_spiel MCTSBot {settings}")
    else:
        other = checkpoint(HEX_GAME, args.opponent_planner)
        theirs = OurHex(other, args.opponent_option, seed=args.seed)
        settings = f"{other} option {args.opponent_option}"
        print(f"our planner {planner} at option {args.option} vs {settings}")
    results = []
    for i in range(args.games):
        colour = i % 2
        opening = random_opening(i // 2, range(HEX_CELLS), seed=args.seed)
        black, white = (ours, theirs) if colour == 0 else (theirs, ours)
        record = referee(black, white, opening, max_plies=HEX_CELLS)
        winner = (len(record.moves) - 1) % 2  # Hex ends on the winner's move
        disagree = not (ours.over() and theirs.over()) or ours.board() != theirs.board()
        if record.end == "resign" or record.end.startswith("refused") or disagree:
            raise RuntimeError(f"game {i + 1}: the engines disagree ({record.end}): {record}")
        if isinstance(theirs, SpielHex) and theirs.state.returns()[winner] != 1.0:
            raise RuntimeError(f"game {i + 1}: open_spiel's winner is not the last mover")
        score = 1.0 if winner == colour else 0.0
        results.append(Result(colour, score, record, number=i + 1))
        print(
            f"game {i + 1}/{args.games}: we play {'black' if colour == 0 else 'white'}, "
            f"opening {' '.join(map(hex_cell_name, opening))}, {len(record.moves)} plies: "
            f"{'win' if score else 'loss'}",
            flush=True,
        )
    return results, settings
