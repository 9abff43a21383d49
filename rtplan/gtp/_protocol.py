"""The GTP side of `rtplan gtp`: the command table, its errors, and parsing of its arguments."""

from __future__ import annotations

import math

from rtplan.games import go

COMMANDS = (
    "protocol_version",
    "name",
    "version",
    "known_command",
    "list_commands",
    "boardsize",
    "clear_board",
    "komi",
    "fixed_handicap",
    "place_free_handicap",
    "set_free_handicap",
    "play",
    "genmove",
    "undo",
    "final_score",
    "final_status_list",
    "showboard",
    "time_settings",
    "time_left",
    "kgs-time_settings",
    "rtplan-budget",
    "quit",
)

#: Commands answered at once, even while start-up still compiles: they need no position.
NO_POSITION = frozenset(
    {
        "protocol_version",
        "name",
        "version",
        "known_command",
        "list_commands",
        "boardsize",
        "clear_board",
        "komi",
        "time_settings",
        "time_left",
        "kgs-time_settings",
        "quit",
    }
)
#: Commands that wait for the searches to be compiled and timed.
SEARCHES = frozenset({"genmove", "rtplan-budget"})


class GtpError(Exception):
    """A command failed; its message is the `? message` answer."""


def parse_colour(text: str) -> int:
    """0 for black ("b", "black"), 1 for white ("w", "white"), any case."""
    colour = {"b": 0, "black": 0, "w": 1, "white": 1}.get(text.lower())
    if colour is None:
        raise GtpError(f"invalid color {text!r}")
    return colour


def parse_vertex(text: str) -> int:
    """pgx's action of a GTP vertex (`games.go.parse_vertex`), failing as a GTP error."""
    try:
        return go.parse_vertex(text)
    except ValueError as e:
        raise GtpError(str(e)) from None


def number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise GtpError(f"syntax error: {what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise GtpError(f"syntax error: {what} must be finite, got {text!r}")
    return value


def clean(line: str) -> str:
    """A command line as GTP reads it: no comment, no control characters, tabs as spaces."""
    line = line.split("#", 1)[0].replace("\t", " ")
    return "".join(c for c in line if c >= " " and c != "\x7f").strip()


def score_text(black: float, white: float, komi: float) -> str:
    """GTP's final_score: "B+x", "W+x" or "0" (x = the margin after komi)."""
    margin = black - white - komi
    if margin == 0:
        return "0"
    return f"{'B' if margin > 0 else 'W'}+{abs(margin):g}"


#: GTP's fixed handicap points on 9x9 (GTP v2 section 4.1.1 with 19x19's D4 Q16 ... K10 moved
#: to the 3-3 points, the sides' midpoints and the centre).
_CORNERS = ("C3", "G7", "C7", "G3")
_SIDES = ("C5", "G5", "E3", "E7")


def handicap_vertices(n: int) -> list[str]:
    """The vertices of `fixed_handicap n` on 9x9: the corners first, the centre for odd n >= 5.

    Raises:
        GtpError: n is not in 2..9 ("invalid number of stones").
    """
    if not 2 <= n <= 9:
        raise GtpError("invalid number of stones")
    if n <= 4:
        return list(_CORNERS[:n])
    if n % 2 == 0:
        return [*_CORNERS, *_SIDES[: n - 4]]
    return [*_CORNERS, *_SIDES[: n - 5], "E5"]
