"""Our clock-game planners against outside engines: Speed Go vs GNU Go, Speed Hex vs MCTS.

Usage:
    python bench/match.py go --opponent gnugo --level 1 [--handicap H] --games N --option K
    python bench/match.py go --opponent mcts --rollouts R --games N --option K
    python bench/match.py hex --opponent mcts --rollouts R --games N --option K
    python bench/match.py {go,hex} --opponent planner --opponent-planner F --games N --option K

Go: the shipped Speed Go planner through `rtplan gtp --budget K` (a subprocess; no time
settings, so an unlimited clock) against GNU Go (`gnugo --mode gtp --level L --chinese-rules
--komi 7.5 --capture-all-dead`), refereed over GTP by this script: genmove to the side to move,
play to the other, until two passes or pgx's cap of 162 plies. Both engines then give their
`final_score`; GNU Go's (it judges dead stones, and captures ours before passing) decides the
game, ours (pgx's area score, no dead-stone removal) is reported beside it and a game where the
two winners differ is counted as a disagreement.

`--handicap H`: we take black with H stones on GNU Go's fixed-handicap points (white passing
in between, then a random ply each), komi still 7.5; every game is ours as black.

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
`--option`): Go through a second `rtplan gtp`, Hex in process; the win rate is the first
planner's.

Both sides are deterministic (ours at a fixed seed, GNU Go always, MCTS at its seed), so each
pair of games starts from a random opening of 2-4 plies seeded by the pair's index and `--seed`,
played once with each colour. Prints a table (wins, losses, win rate +- binomial SE, unique
games, the mean final margin for Go) and appends a row to bench/results/match.csv. Installs GNU
Go (`apt-get install -y gnugo`) or open_spiel (`pip install open-spiel==2.0.2`, the `bench`
extra of pyproject.toml) when missing.

`--games-csv F` also writes each game (its number, our colour, the opening, the result, every
move). `python bench/match.py compare --a A1.csv [A2.csv ...] --b B1.csv [...]` pairs two sets
of such files game by game (the same seed and game number: the same opening, our same colour)
and prints both win rates and their difference +- its paired SE: two of our planners, or two
options of one, against one opponent on the same openings. `--dead-stones` (Go): GNU Go counts
the dead stones left on each final board, and says whether removing them changes the winner.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import datetime
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from harness.stats import binomial_se, paired

ROOT = Path(__file__).resolve().parents[1]
RESULTS_CSV = ROOT / "bench" / "results" / "match.csv"
#: The `bench` extra of pyproject.toml.
OPEN_SPIEL = "open-spiel==2.0.2"
#: Debian installs GNU Go outside root's PATH.
DEBIAN_GNUGO = "/usr/games/gnugo"

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

CSV_FIELDS = (
    "date",
    "commit",
    "command",
    "game",
    "option",
    "opponent",
    "settings",
    "seed",
    "n",
    "wins",
    "win_rate",
    "se",
    "unique",
    "margin",
    "margin_rtplan",
    "disagreements",
)


#: `--games-csv`: one row per game.
GAMES_FIELDS = (
    "seed", "game", "colour", "opening", "plies", "end", "score", "margin", "dead_black",
    "dead_white", "moves",
)  # fmt: skip
#: The fields `compare` pairs on and reads.
PAIRED_FIELDS = ("seed", "game", "colour", "opening", "score")


# ---- Pure logic --------------------------------------------------------------------------


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
    from games.go import vertex_name

    return vertex_name(point).lower()


def go_point(vertex: str) -> int:
    """The pgx point of a GTP vertex (81 for pass); inverse of `go_vertex`."""
    from games.go import parse_vertex

    return parse_vertex(vertex)


def hex_to_spiel(action: int) -> int:
    """open_spiel's hex action of our Speed Hex cell.

    Both number cells row * 11 + col, name them "a1" (row 0, col 0) to "k11", give (r, c) the
    same six neighbours ((r, c+-1), (r+-1, c), (r-1, c+1), (r+1, c-1)), and have the first
    player (black, "x") join row 0 to row 10: the translation is the identity on cells
    (tests/test_match.py plays random games in both and compares boards and winners). Swap
    (121) has no counterpart.
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
    from games.hex import cell_name

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


# ---- Referee -----------------------------------------------------------------------------


class Refused(Exception):
    """An engine refused a command (a GTP `? message` answer, or an illegal move)."""


class Player(Protocol):
    """One side of `referee`: an engine that keeps its own copy of the game."""

    def new_game(self) -> None: ...

    def play(self, colour: int, move) -> None:
        """Plays `colour`'s (0 black, 1 white) move on this engine's board; raises Refused."""

    def genmove(self, colour: int):
        """Chooses and plays a move for `colour` on this engine's board (or RESIGN)."""

    def over(self) -> bool:
        """The game ended by this engine's rules (a GTP engine leaves that to the referee)."""


@dataclasses.dataclass
class GameRecord:
    """One refereed game."""

    #: Every move, the opening's included, black's first.
    moves: list
    #: Plies of the random opening.
    opening: int
    #: "two passes", "ply cap", "game over" (an engine's rules ended it), "resign" or
    #: "refused: ..." (an engine refused the other's move).
    end: str
    #: The colour that resigned, if one did.
    resigned: int | None = None


def referee(
    black: Player, white: Player, opening: Sequence, *, max_plies: int, pass_move=PASS
) -> GameRecord:
    """Plays one game between two engines that each keep their own board.

    Both play the opening; then the side to move gets genmove and the other side play, until
    two passes in a row, `max_plies` plies, a resignation, an engine's own end of game, or a
    move the other engine refuses (recorded, and the game stops there).
    """
    players = (black, white)
    for p in players:
        p.new_game()
    moves: list = []
    for move in opening:
        for p in players:
            p.play(len(moves) % 2, move)
        moves.append(move)
    while len(moves) < max_plies:
        if len(moves) >= 2 and moves[-1] == moves[-2] == pass_move:
            return GameRecord(moves, len(opening), "two passes")
        if any(p.over() for p in players):
            return GameRecord(moves, len(opening), "game over")
        colour = len(moves) % 2
        move = players[colour].genmove(colour)
        if move == RESIGN:
            return GameRecord(moves, len(opening), "resign", resigned=colour)
        moves.append(move)
        try:
            players[1 - colour].play(colour, move)
        except Refused as e:
            return GameRecord(moves, len(opening), f"refused: {e}")
    if any(p.over() for p in players) or moves[-2:] == [pass_move, pass_move]:
        return GameRecord(moves, len(opening), "game over")
    return GameRecord(moves, len(opening), "ply cap")


class GtpProcess:
    """A GTP engine in a subprocess, one command and one answer at a time."""

    def __init__(self, argv: Sequence[str], *, name: str, stderr=subprocess.DEVNULL) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )

    def send(self, command: str) -> str:
        """The answer's text (without "= "); raises Refused on a `? message` answer."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} exited (code {self.proc.poll()}) on {command!r}")
            if not line.strip():
                if lines:
                    break
                continue  # blank lines before an answer
            lines.append(line.rstrip("\n"))
        text = "\n".join(lines)
        if text.startswith("?"):
            raise Refused(f"{self.name}: {command!r} -> {text[1:].strip()!r}")
        if not text.startswith("="):
            raise RuntimeError(f"{self.name}: {command!r} -> not a GTP answer: {text!r}")
        return text[1:].strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=30)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> GtpProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class GtpPlayer:
    """A `Player` over a GTP engine; moves are lower-case GTP vertices or "pass"."""

    def __init__(self, engine: GtpProcess) -> None:
        self.engine = engine

    def new_game(self) -> None:
        self.engine.send("clear_board")

    def play(self, colour: int, move: str) -> None:
        self.engine.send(f"play {'bw'[colour]} {move}")

    def genmove(self, colour: int) -> str:
        return self.engine.send(f"genmove {'bw'[colour]}").lower()

    def over(self) -> bool:
        return False


# ---- Results -----------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    """One game from our side."""

    #: Our colour: 0 black, 1 white.
    colour: int
    #: 1 win, 0 loss (0.5 a tie).
    score: float
    record: GameRecord
    #: Go: the final margin from our side by the opponent's score (None: it gives only the
    #: winner) and by our own final_score.
    margin: float | None = None
    margin_rtplan: float | None = None
    #: The two engines disagree on the winner.
    disagree: bool = False
    #: The game's number in its match (1-based): with the match's seed it names the opening and
    #: our colour, which pairs it with the same game of another match (`compare`).
    number: int = 0
    #: `--dead-stones`: GNU Go's dead black and white stones on the final board (None: not
    #: judged), and the winner by its score (which removes them) from our side, +1 / -1 / 0.
    dead: tuple[int, int] | None = None
    dead_verdict: float | None = None


def summarise(results: Sequence[Result]) -> dict:
    """n, wins, win rate, its SE, unique games (distinct move lists), mean margins."""
    n = len(results)
    wins = sum(r.score for r in results)
    margins = [r.margin for r in results if r.margin is not None]
    ours = [r.margin_rtplan for r in results if r.margin_rtplan is not None]
    return {
        "n": n,
        "wins": wins,
        "win_rate": wins / n if n else 0.0,
        "se": binomial_se(wins, n),
        "unique": len({tuple(r.record.moves) for r in results}),
        "margin": sum(margins) / len(margins) if margins else None,
        "margin_rtplan": sum(ours) / len(ours) if ours else None,
        "disagreements": sum(r.disagree for r in results),
    }


def print_table(title: str, results: Sequence[Result]) -> dict:
    """Prints the match table (per colour and overall); returns `summarise(results)`."""
    go = any(r.margin_rtplan is not None for r in results)
    print(f"\n{title}")
    head = "| we play | games | wins | losses | win rate +- SE | unique games |"
    if go:
        head += " mean margin (the opponent's score / ours) | score disagreements |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name, part in (
        ("black", [r for r in results if r.colour == 0]),
        ("white", [r for r in results if r.colour == 1]),
        ("both", list(results)),
    ):
        s = summarise(part)
        line = (
            f"| {name} | {s['n']} | {s['wins']:g} | {s['n'] - s['wins']:g} | "
            f"{s['win_rate']:.2f} +- {s['se']:.2f} | {s['unique']} |"
        )
        if go:
            line += f" {_num(s['margin'])} / {_num(s['margin_rtplan'])} | {s['disagreements']} |"
        print(line)
    return summarise(results)


def _sign(x: float) -> float:
    """+1, -1 or 0."""
    return float((x > 0) - (x < 0))


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def append_csv(path: Path, row: dict) -> None:
    """Appends `row` (CSV_FIELDS) to `path`, writing the header first if the file is new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in CSV_FIELDS})


def write_games(path: Path, seed: int, results: Sequence[Result]) -> None:
    """Writes one `GAMES_FIELDS` row per game of a match to `path` (replacing it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=GAMES_FIELDS)
        writer.writeheader()
        for r in results:
            opening = " ".join(str(m) for m in r.record.moves[: r.record.opening])
            writer.writerow(
                {
                    "seed": seed,
                    "game": r.number,
                    "colour": "bw"[r.colour],
                    "opening": opening,
                    "plies": len(r.record.moves),
                    "end": r.record.end,
                    "score": f"{r.score:g}",
                    "margin": "" if r.margin is None else r.margin,
                    "dead_black": "" if r.dead is None else r.dead[0],
                    "dead_white": "" if r.dead is None else r.dead[1],
                    "moves": " ".join(str(m) for m in r.record.moves),
                }
            )


def read_games(paths: Sequence[Path]) -> dict[tuple[int, int], dict]:
    """`--games-csv` files (matches on different seeds) as {(seed, game number): row}; a
    clear error if one is not such a file or two hold the same game."""
    games: dict[tuple[int, int], dict] = {}
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or set(PAIRED_FIELDS) - set(rows[0]):
            raise SystemExit(f"match.py compare: {path} is not a --games-csv file {PAIRED_FIELDS}")
        for r in rows:
            key = (int(r["seed"]), int(r["game"]))
            if key in games:
                raise SystemExit(f"match.py compare: game {key} twice (in {path})")
            games[key] = r
    return games


def paired_comparison(a: dict[tuple[int, int], dict], b: dict[tuple[int, int], dict]) -> dict:
    """Win rates of two matches over the games both played (same seed, game number, colour and
    opening) and the difference a - b +- its paired SE (sd of the per-game differences /
    sqrt(n))."""
    keys = sorted(set(a) & set(b))
    if len(keys) < 2:
        raise SystemExit("match.py compare: fewer than 2 games in common (same --seed, game)")
    for key in keys:
        if (a[key]["colour"], a[key]["opening"]) != (b[key]["colour"], b[key]["opening"]):
            raise SystemExit(f"match.py compare: game {key} has different openings or colours")
    sa = [float(a[k]["score"]) for k in keys]
    sb = [float(b[k]["score"]) for k in keys]
    n = len(keys)
    diff, se = paired(sa, sb)
    return {
        "n": n,
        "a": statistics.fmean(sa),
        "b": statistics.fmean(sb),
        "diff": diff,
        "se": se,
        "only_a": len(a) - n,
        "only_b": len(b) - n,
    }


def compare(a_paths: Sequence[Path], b_paths: Sequence[Path]) -> dict:
    """`match.py compare`: prints the paired comparison of two sets of `--games-csv` files."""
    c = paired_comparison(read_games(a_paths), read_games(b_paths))
    names = [" ".join(str(p) for p in paths) for paths in (a_paths, b_paths)]
    print(f"| games in common | A: {names[0]} | B: {names[1]} | A - B +- paired SE |")
    print("|---|---|---|---|")
    print(f"| {c['n']} | {c['a']:.2f} | {c['b']:.2f} | {c['diff']:+.2f} +- {c['se']:.2f} |")
    if c["only_a"] or c["only_b"]:
        print(f"(unpaired, left out: {c['only_a']} games of A, {c['only_b']} of B)")
    return c


def git_commit() -> str:
    """HEAD's commit (read-only), or "unknown" outside a git checkout."""
    out = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "unknown"


# ---- Set-up ------------------------------------------------------------------------------


def ensure_gnugo() -> str:
    """GNU Go's path, installed from Debian (`apt-get install -y gnugo`) when missing."""

    def find() -> str | None:
        return shutil.which("gnugo") or (DEBIAN_GNUGO if os.access(DEBIAN_GNUGO, os.X_OK) else None)

    if (path := find()) is None:
        print("GNU Go missing: apt-get install -y gnugo", file=sys.stderr, flush=True)
        install = ["apt-get", "install", "-y", "gnugo"]
        if subprocess.run(install, stdout=sys.stderr, check=False).returncode != 0:
            subprocess.run(["apt-get", "update"], stdout=sys.stderr, check=True)
            subprocess.run(install, stdout=sys.stderr, check=True)
        if (path := find()) is None:
            raise SystemExit("match.py: gnugo installed but not found")
    return path


def ensure_open_spiel() -> None:
    """Installs open_spiel (`pip install open-spiel==2.0.2`) into this Python when missing."""
    try:
        import pyspiel  # noqa: F401
    except ImportError:
        print(f"open_spiel missing: pip install {OPEN_SPIEL}", file=sys.stderr, flush=True)
        pip = [sys.executable, "-m", "pip", "install", OPEN_SPIEL]
        subprocess.run(pip, stdout=sys.stderr, check=True)


def _checkpoint(game: str, planner: str | None) -> Path:
    path = Path(planner) if planner else ROOT / "checkpoints" / game / "planner.msgpack"
    if not path.exists():
        raise SystemExit(f"match.py: no planner checkpoint at {path}")
    return path


# ---- Go: rtplan gtp vs GNU Go ------------------------------------------------------------


def spiel_go_actions(game) -> dict[str, int]:
    """open_spiel go's action of each lower-case GTP vertex ("a1" is action 0) and of "pass"."""
    state = game.new_initial_state()
    return {
        state.action_to_string(0, a).split()[1].lower(): a
        for a in range(game.num_distinct_actions())
    }


class SpielMcts:
    """open_spiel's MCTSBot (one random rollout per leaf) on an open_spiel game: the Go and Hex
    opponent. Subclasses translate our moves to open_spiel's actions and back."""

    def __init__(self, name: str, params: dict, rollouts: int, *, seed: int, uct_c: float):
        import numpy as np
        import pyspiel
        from open_spiel.python.algorithms import mcts

        self.game = pyspiel.load_game(name, params)
        rng = np.random.RandomState(seed)
        evaluator = mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=rng)
        self.bot = mcts.MCTSBot(self.game, uct_c, rollouts, evaluator, random_state=rng)

    def to_action(self, move):
        """open_spiel's action of our move (None: no such action)."""
        raise NotImplementedError

    def to_move(self, action: int):
        """Our move of an open_spiel action."""
        raise NotImplementedError

    def new_game(self) -> None:
        self.state = self.game.new_initial_state()

    def play(self, colour: int, move) -> None:
        action = self.to_action(move)
        if colour != self.state.current_player() or action not in self.state.legal_actions():
            raise Refused(f"open_spiel: illegal move {move} for {'bw'[colour]}")
        self.state.apply_action(action)

    def genmove(self, colour: int):
        action = self.bot.step(self.state)
        self.state.apply_action(action)
        return self.to_move(action)

    def over(self) -> bool:
        return self.state.is_terminal()


def _mcts_settings(args: argparse.Namespace, board: str) -> str:
    return (
        f"max_simulations={args.rollouts} RandomRolloutEvaluator(n_rollouts=1) "
        f"uct_c={args.uct_c:g} solve=True {board}"
    )


class SpielGo(SpielMcts):
    """open_spiel's MCTSBot on open_spiel's 9x9 go; moves are lower-case GTP vertices."""

    def __init__(self, rollouts: int, *, seed: int = 0, uct_c: float = 2.0) -> None:
        params = {"board_size": GO_SIZE, "komi": KOMI}
        super().__init__("go", params, rollouts, seed=seed, uct_c=uct_c)
        self.actions = spiel_go_actions(self.game)
        self.vertices = {a: v for v, a in self.actions.items()}

    def to_action(self, move: str) -> int | None:
        return self.actions.get(move)

    def to_move(self, action: int) -> str:
        return self.vertices[action]

    def black_result(self) -> float:
        """+1 black won, -1 white won, 0 a tie, by open_spiel's area score (a finished game)."""
        if not self.state.is_terminal():
            raise RuntimeError("open_spiel's go game is not over")
        return float(self.state.returns()[0])


def _gtp_planner(planner: Path, option: int, seed: int) -> list:
    return [sys.executable, "-m", "rtplan", "gtp", "--game", GO_GAME, "--planner", planner,
            "--budget", option, "--seed", seed]  # fmt: skip


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
    result.dead_verdict = sign * _sign(parse_score(judge.send("final_score")))


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
    """`--games` games of `rtplan gtp --budget K` against `--opponent`; (results, settings).

    The opponent judges the game: GNU Go's `final_score` (it removes dead stones), open_spiel's
    returns, or the other planner's `final_score`. Ours (pgx's area score) is the second margin,
    and a game whose two winners differ counts as a disagreement.
    """
    planner = _checkpoint(GO_GAME, args.planner)
    ours_cmd = _gtp_planner(planner, args.option, args.seed)
    log = tempfile.NamedTemporaryFile("w", prefix="match-rtplan-gtp-", suffix=".log", delete=False)  # noqa: SIM115
    print(f"rtplan gtp: {' '.join(map(str, ours_cmd))} (log {log.name})")
    with contextlib.ExitStack() as stack:
        stack.enter_context(log)
        ours = stack.enter_context(GtpProcess(ours_cmd, name="rtplan", stderr=log))
        engines = [ours]
        if args.opponent == "mcts":
            ensure_open_spiel()
            theirs = SpielGo(args.rollouts, seed=args.seed, uct_c=args.uct_c)
            settings = _mcts_settings(args, "board_size=9 komi=7.5")

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
                other = _checkpoint(GO_GAME, args.opponent_planner)
                cmd = _gtp_planner(other, args.opponent_option, args.seed)
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
                return _sign(margin), margin

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
            black, white = (GtpPlayer(ours), theirs)[:: 1 if colour == 0 else -1]
            record = referee(black, white, opening, max_plies=GO_MAX_PLIES)
            sign = 1.0 if colour == 0 else -1.0
            ours_score = ours.send("final_score")
            margin_ours = sign * parse_score(ours_score)
            if record.resigned is not None:
                score = 0.0 if record.resigned == colour else 1.0
                margin = margin_ours = None
                disagree = False
                verdict = f"{'bw'[record.resigned]} resigned"
            else:
                if record.end.startswith("refused"):
                    # The two rule sets disagree on a move's legality. Against open_spiel go: a
                    # move repeating an earlier position, which `rtplan gtp` refuses (pgx: a loss
                    # for the mover) and open_spiel scores a draw (the one difference:
                    # tests/test_match.py). Void: counts for neither side.
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
                disagree = _sign(margin_ours) != result
                verdict = f"{args.opponent}'s verdict {result:+g}, margin {_num(margin)}"
            result = Result(colour, score, record, margin, margin_ours, disagree, i + 1)
            if dead_judge is not None and record.resigned is None:
                judge_dead_stones(dead_judge, result, replay=args.opponent != "gnugo")
                verdict += (
                    f"; GNU Go: {result.dead[0]} black, {result.dead[1]} white stones dead, "
                    f"its verdict {result.dead_verdict:+g}"
                )
            results.append(result)
            print(
                f"game {i + 1}/{args.games}: we play {'black' if colour == 0 else 'white'}, "
                f"opening {' '.join(opening)}, {len(record.moves)} plies, {record.end}; "
                f"{verdict}, ours {ours_score}: "
                f"{'win' if score == 1 else 'loss' if score == 0 else 'tie'}"
                f"{' (scores disagree)' if disagree else ''}",
                flush=True,
            )
    if voided:
        settings += f" voided={voided} (a move one engine refused)"
    return results, settings


# ---- Hex: our planner in process vs open_spiel MCTS ---------------------------------------


def our_hex_board(state) -> str:
    """121 characters, cell by cell: "x" black (moved first), "o" white, "." empty."""
    import numpy as np

    x = state.inner.board._x  # pgx's hex: board > 0 for the player to move, < 0 the other
    board = np.asarray(x.board)
    to_move = int(x.step_count) % 2
    mine, theirs = "xo"[to_move], "xo"[1 - to_move]
    return "".join(mine if v > 0 else theirs if v < 0 else "." for v in board)


def spiel_hex_board(state) -> str:
    """121 characters of an open_spiel hex state, as `our_hex_board`."""
    return "".join(c for c in str(state) if c in "xo.")


class OurHex:
    """Our Speed Hex planner at option k: unlimited clock, deterministic search."""

    def __init__(self, planner_file: Path, k: int, *, seed: int = 0) -> None:
        import jax

        from planner.calibrate import with_sims
        from planner.compiled import CompiledOptions
        from planner.options import Planner
        from planner.store import load_planner

        base, params, _ = load_planner(HEX_GAME, str(planner_file))
        self.planner = Planner(with_sims(base, k, base.sims(k)))
        self.k = k
        game = self.planner.game
        self._init, self._step = jax.jit(game.init), jax.jit(game.step)
        self._options = CompiledOptions(self.planner, params)
        self._key = jax.random.PRNGKey(seed)
        self.plies = 0

    def new_game(self) -> None:
        import jax

        self.state = self._init(jax.random.PRNGKey(0))
        self.plies = 0

    def play(self, colour: int, move: int) -> None:
        if colour != self.plies % 2 or not bool(self.state.legal_action_mask[move]):
            raise Refused(f"rtplan: illegal move {move} for {'bw'[colour]}")
        self.state = self._step(self.state, move, 0)
        self.plies += 1

    def genmove(self, colour: int) -> int:
        import jax

        # Swap has no counterpart in open_spiel's hex: the root never considers it.
        state = self.state.replace(
            legal_action_mask=self.state.legal_action_mask.at[HEX_SWAP].set(False)
        )
        key = jax.random.fold_in(self._key, self.plies)
        out = self._options.option(self.k, key[None], jax.tree.map(lambda x: x[None], state))
        move = int(out.actions[0, 0])
        self.play(colour, move)
        return move

    def over(self) -> bool:
        return bool(self.state.terminated)

    def board(self) -> str:
        return our_hex_board(self.state)


class SpielHex(SpielMcts):
    """open_spiel's MCTSBot on open_spiel's 11x11 hex (no swap)."""

    def __init__(self, rollouts: int, *, seed: int = 0, uct_c: float = 2.0) -> None:
        super().__init__("hex", {"board_size": HEX_SIZE}, rollouts, seed=seed, uct_c=uct_c)

    def to_action(self, move: int) -> int:
        return hex_to_spiel(move)

    def to_move(self, action: int) -> int:
        return spiel_to_hex(action)

    def board(self) -> str:
        return spiel_hex_board(self.state)


def hex_match(args: argparse.Namespace) -> tuple[list[Result], str]:
    """`--games` games of our Speed Hex option against `--opponent`; (results, settings)."""
    from rtplan.jax_setup import use_compile_cache

    use_compile_cache()  # before JAX starts: the options compile once across runs
    planner = _checkpoint(HEX_GAME, args.planner)
    ours = OurHex(planner, args.option, seed=args.seed)
    if args.opponent == "mcts":
        ensure_open_spiel()
        theirs = SpielHex(args.rollouts, seed=args.seed, uct_c=args.uct_c)
        settings = _mcts_settings(args, "board_size=11 no swap")
        print(f"our planner {planner} at option {args.option}; open_spiel MCTSBot {settings}")
    else:
        other = _checkpoint(HEX_GAME, args.opponent_planner)
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


# ---- Command line ------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
        p.add_argument("--option", type=int, required=True, help="our option: a budget k")
        p.add_argument("--seed", type=int, default=0, help="openings, our search, MCTS's")
        p.add_argument("--planner", default=None, help="default checkpoints/<game>/planner.msgpack")
        p.add_argument("--csv", default=str(RESULTS_CSV), help="results CSV to append to")
        p.add_argument("--games-csv", default=None, help="also write each game to this CSV")
    cmp = sub.add_parser("compare", help="two sets of --games-csv files, paired game by game")
    cmp.add_argument("--a", type=Path, nargs="+", required=True, help="A's --games-csv files")
    cmp.add_argument("--b", type=Path, nargs="+", required=True, help="B's, the same seeds")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.game == "compare":
        compare(args.a, args.b)
        return 0
    handicap = getattr(args, "handicap", 0)
    if handicap and (args.opponent != "gnugo" or handicap not in GO_HANDICAP):
        raise SystemExit("match.py: --handicap is 2 to 9 stones, against --opponent gnugo")
    if not handicap and (args.games < 2 or args.games % 2):
        raise SystemExit("match.py: --games must be even (each opening is played by both colours)")
    if handicap and args.games < 1:
        raise SystemExit("match.py: --games must be at least 1")
    if args.opponent == "planner" and args.opponent_planner is None:
        raise SystemExit("match.py: --opponent planner needs --opponent-planner")
    if args.opponent_option is None:
        args.opponent_option = args.option
    results, settings = (go_match if args.game == "go" else hex_match)(args)
    game = GO_GAME if args.game == "go" else HEX_GAME
    if args.opponent == "gnugo":
        opponent = f"gnugo level {args.level}" + (f" handicap {handicap}" if handicap else "")
    elif args.opponent == "mcts":
        opponent = f"open_spiel mcts {args.rollouts} rollouts"
    else:
        opponent = f"planner {args.opponent_planner}"
    title = f"{game} option {args.option} vs {opponent} ({settings}), seed {args.seed}:"
    summary = print_table(title, results)
    print_dead_stones(results)
    command = " ".join(["python", "bench/match.py", *(argv if argv is not None else sys.argv[1:])])
    row = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit(),
        "command": command,
        "game": game,
        "option": args.option,
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
        write_games(Path(args.games_csv), args.seed, results)
        print(f"games written to {args.games_csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
