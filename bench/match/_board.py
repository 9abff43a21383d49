"""The two games' boards as the matches see them: sizes, openings, vertex names, GTP scores."""

from __future__ import annotations

import random
from collections.abc import Sequence

GO_GAME = "speed-go-v0"
GO_SIZE = 9
KOMI = 7.5
#: pgx ends a 9x9 game after 2 * 81 plies (`games.go.SpeedGo`).
GO_MAX_PLIES = 2 * GO_SIZE * GO_SIZE
HEX_GAME = "speed-hex-v0"
HEX_SIZE = 11
HEX_CELLS = HEX_SIZE * HEX_SIZE
#: Our game's swap action; open_spiel's hex (swap=False) has none.
HEX_SWAP = HEX_CELLS
#: Random plies before the engines take over (inclusive range).
OPENING_PLIES = (2, 4)
#: Go openings use the 7x7 interior only: with at most four stones on the board no move there
#: can capture or be suicide, so the opening is legal under any rules.
GO_OPENING_POINTS = tuple(
    r * GO_SIZE + c for r in range(1, GO_SIZE - 1) for c in range(1, GO_SIZE - 1)
)
PASS = "pass"
#: GNU Go's `fixed_handicap N` points on 9x9, in its order (N = 2..9).
GO_HANDICAP = {
    2: "g7 c3",
    3: "c7 g7 c3",
    4: "c7 g7 c3 g3",
    5: "c7 g7 e5 c3 g3",
    6: "c7 g7 c5 g5 c3 g3",
    7: "c7 g7 c5 e5 g5 c3 g3",
    8: "c7 e7 g7 c5 g5 c3 e3 g3",
    9: "c7 e7 g7 c5 e5 g5 c3 e3 g3",
}
RESIGN = "resign"


def random_opening(
    index: int, points: Sequence[int], *, seed: int = 0, plies: tuple[int, int] = OPENING_PLIES
) -> list[int]:
    """The opening of pair `index`: 2-4 distinct points of `points`, black's first.

    Deterministic in (seed, index) across runs and machines (a string seed is hashed with
    SHA-512, not Python's randomised hash).
    """
    rng = random.Random(f"rtplan match opening {seed} {index}")
    return rng.sample(list(points), rng.randint(*plies))


def handicap_opening(stones: int, index: int, *, seed: int = 0) -> list[str]:
    """Game `index`'s opening with `stones` handicap stones for black.

    Black plays GNU Go's fixed-handicap points with white passing in between (pgx has no
    handicap placement, so both engines replay them as moves); then one random white and one
    random black ply on free interior points, so that deterministic engines play distinct
    games. White moves next. No move of it can capture: star points are two lines apart, so a
    random stone touches at most two stones.
    """
    if stones not in GO_HANDICAP:
        raise ValueError(f"a 9x9 handicap is 2 to 9 stones, not {stones}")
    points = GO_HANDICAP[stones].split()
    moves = [m for v in points for m in (PASS, v)][1:]
    free = [p for p in GO_OPENING_POINTS if go_vertex(p) not in points]
    return moves + [go_vertex(p) for p in random_opening(index, free, seed=seed, plies=(2, 2))]


def go_vertex(point: int) -> str:
    """The lower-case GTP vertex of a pgx Go point (`games.go.vertex_name`): 0 -> "a9"."""
    from rtplan.games.go import vertex_name

    return vertex_name(point).lower()


def go_point(vertex: str) -> int:
    """The pgx point of a GTP vertex (81 for pass); inverse of `go_vertex`."""
    from rtplan.games.go import parse_vertex

    return parse_vertex(vertex)


def hex_to_spiel(action: int) -> int:
    """open_spiel's hex action of our Speed Hex cell.

    Both number cells row * 11 + col, name them "a1" (row 0, col 0) to "k11", give (r, c) the
    same six neighbours ((r, c+-1), (r+-1, c), (r-1, c+1), (r+1, c-1)), and have the first
    player (black, "x") join row 0 to row 10: the translation is the identity on cells
    (tests/bench/test_bench_match.py plays random games in both and compares boards and winners).
    Swap (121) has no counterpart.
    """
    if not 0 <= action < HEX_CELLS:
        raise ValueError(f"Speed Hex action {action} is not a cell (swap is never played here)")
    return action


def spiel_to_hex(action: int) -> int:
    """Our Speed Hex cell of an open_spiel hex action; inverse of `hex_to_spiel`."""
    if not 0 <= action < HEX_CELLS:
        raise ValueError(f"open_spiel hex action {action} is not a cell of the 11x11 board")
    return action


def hex_cell_name(action: int) -> str:
    """A Speed Hex cell's name (`games.hex.cell_name`), as open_spiel also writes it ("a1")."""
    from rtplan.games.hex import cell_name

    return cell_name(action)


def parse_score(text: str) -> float:
    """Black's margin of a GTP `final_score` answer: "B+7.5" -> 7.5, "W+3" -> -3, "0" -> 0."""
    text = text.strip().upper()
    if text == "0":
        return 0.0
    if len(text) < 3 or text[:2] not in ("B+", "W+"):
        raise ValueError(f"not a GTP score: {text!r}")
    margin = float(text[2:])
    return margin if text[0] == "B" else -margin
