"""A match's games from our side: the table, the results CSV, the per-game CSV and `compare`."""

from __future__ import annotations

import csv
import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path

from bench._common import RESULTS, append_rows
from bench.match._referee import GameRecord
from rtplan.harness.stats import binomial_se, paired, standard_error

RESULTS_CSV = RESULTS / "match.csv"

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


#: `--games-csv`: one row per game. Timed matches (`--time-settings`) fill the time columns:
#: our time manager (or "option K"), the settings ("MAIN BYO_TIME BYO_STONES"), each side's
#: seconds left at the end (of the main time, or of the current byo-yomi period), whether we
#: lost on time (1 / 0), our mean budget k per timed move (0: the policy-only move) and our
#: mean seconds per move by the referee's clock.
GAMES_FIELDS = (
    "seed", "game", "colour", "opening", "plies", "end", "score", "margin", "dead_black",
    "dead_white", "time_manager", "time_settings", "time_left_ours", "time_left_theirs",
    "lost_on_time", "mean_k", "move_s_ours", "moves",
)  # fmt: skip
#: The fields `compare` pairs on and reads.
PAIRED_FIELDS = ("seed", "game", "colour", "opening", "score")


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
    #: A timed match against `rtplan gtp`'s time manager: our mean budget k per move (None:
    #: not reported).
    mean_k: float | None = None

    @property
    def timed(self) -> bool:
        return self.record.clocks is not None

    def time_left(self, side: int = 0) -> float | None:
        """Seconds left at the end on our clock (`side` 0) or the opponent's (1); None untimed."""
        if self.record.clocks is None:
            return None
        return self.record.clocks[self.colour if side == 0 else 1 - self.colour].seconds

    @property
    def lost_on_time(self) -> bool:
        return self.record.lost_on_time == self.colour

    @property
    def won_on_time(self) -> bool:
        return self.record.lost_on_time == 1 - self.colour

    def move_seconds(self) -> float | None:
        """Our mean seconds per genmove by the referee's clock (None: untimed or no move)."""
        # The referee's times alternate from the first mover after the opening.
        first = self.record.opening % 2
        ours = self.record.seconds[(self.colour - first) % 2 :: 2]
        return statistics.fmean(ours) if ours else None


def summarise(results: Sequence[Result]) -> dict:
    """n, wins, win rate, its SE, unique games (distinct move lists), mean margins; timed
    games: our mean time left at the end and its SE, our losses on time, the opponent's, and
    our mean budget k per move (None where untimed or not reported)."""
    n = len(results)
    wins = sum(r.score for r in results)
    margins = [r.margin for r in results if r.margin is not None]
    ours = [r.margin_rtplan for r in results if r.margin_rtplan is not None]
    left = [r.time_left() for r in results if r.timed]
    ks = [r.mean_k for r in results if r.mean_k is not None]
    return {
        "n": n,
        "wins": wins,
        "win_rate": wins / n if n else 0.0,
        "se": binomial_se(wins, n),
        "unique": len({tuple(r.record.moves) for r in results}),
        "margin": sum(margins) / len(margins) if margins else None,
        "margin_rtplan": sum(ours) / len(ours) if ours else None,
        "disagreements": sum(r.disagree for r in results),
        "time_left": statistics.fmean(left) if left else None,
        "time_left_se": standard_error(left) if left else None,
        "time_losses": sum(r.lost_on_time for r in results),
        "time_wins": sum(r.won_on_time for r in results),
        "mean_k": statistics.fmean(ks) if ks else None,
    }


def print_table(title: str, results: Sequence[Result]) -> dict:
    """Prints the match table (per colour and overall); returns `summarise(results)`."""
    go = any(r.margin_rtplan is not None for r in results)
    timed = any(r.timed for r in results)
    print(f"\n{title}")
    head = "| we play | games | wins | losses | win rate +- SE | unique games |"
    if go:
        head += " mean margin (the opponent's score / ours) | score disagreements |"
    if timed:
        head += " our mean time left +- SE (s) | losses on time: ours / theirs | our mean k |"
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
            margins = f"{fmt_margin(s['margin'])} / {fmt_margin(s['margin_rtplan'])}"
            line += f" {margins} | {s['disagreements']} |"
        if timed:
            left = "-"
            if s["time_left"] is not None:
                left = f"{s['time_left']:.1f} +- {s['time_left_se']:.1f}"
            k = "-" if s["mean_k"] is None else f"{s['mean_k']:.1f}"
            line += f" {left} | {s['time_losses']} / {s['time_wins']} | {k} |"
        print(line)
    return summarise(results)


def sign_of(x: float) -> float:
    """+1, -1 or 0."""
    return float((x > 0) - (x < 0))


def fmt_margin(x: float | None) -> str:
    """A margin as the tables print it ("+4.5"; "-" when there is none)."""
    return "-" if x is None else f"{x:+.1f}"


def append_csv(path: Path, row: dict) -> None:
    """Appends `row` (CSV_FIELDS) to `path`, writing the header first if the file is new."""
    append_rows(path, [row], CSV_FIELDS)


def write_games(
    path: Path,
    seed: int,
    results: Sequence[Result],
    *,
    time_manager: str = "",
    time_settings: str = "",
) -> None:
    """Writes one `GAMES_FIELDS` row per game of a match to `path` (replacing it); a timed
    match's `time_manager` and `time_settings` go on every row."""
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
                    **_time_columns(r, time_manager, time_settings),
                    "moves": " ".join(str(m) for m in r.record.moves),
                }
            )


def _time_columns(r: Result, time_manager: str, time_settings: str) -> dict:
    if not r.timed:
        return {}
    move_s = r.move_seconds()
    return {
        "time_manager": time_manager,
        "time_settings": time_settings,
        "time_left_ours": round(r.time_left(0), 3),
        "time_left_theirs": round(r.time_left(1), 3),
        "lost_on_time": int(r.lost_on_time),
        "mean_k": "" if r.mean_k is None else round(r.mean_k, 2),
        "move_s_ours": "" if move_s is None else round(move_s, 4),
    }


def read_games(paths: Sequence[Path]) -> dict[tuple[int, int], dict]:
    """`--games-csv` files (matches on different seeds) as {(seed, game number): row}; a
    clear error if one is not such a file or two hold the same game."""
    games: dict[tuple[int, int], dict] = {}
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or set(PAIRED_FIELDS) - set(rows[0]):
            raise SystemExit(
                f"bench.match compare: {path} is not a --games-csv file {PAIRED_FIELDS}"
            )
        for r in rows:
            key = (int(r["seed"]), int(r["game"]))
            if key in games:
                raise SystemExit(f"bench.match compare: game {key} twice (in {path})")
            games[key] = r
    return games


def paired_comparison(a: dict[tuple[int, int], dict], b: dict[tuple[int, int], dict]) -> dict:
    """Win rates of two matches over the games both played (same seed, game number, colour and
    opening) and the difference a - b +- its paired SE (sd of the per-game differences /
    sqrt(n))."""
    keys = sorted(set(a) & set(b))
    if len(keys) < 2:
        raise SystemExit("bench.match compare: fewer than 2 games in common (same --seed, game)")
    for key in keys:
        if (a[key]["colour"], a[key]["opening"]) != (b[key]["colour"], b[key]["opening"]):
            raise SystemExit(f"bench.match compare: game {key} has different openings or colours")
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
    """`bench.match compare`: prints the paired comparison of two sets of `--games-csv` files."""
    a, b = read_games(a_paths), read_games(b_paths)
    c = paired_comparison(a, b)
    names = [" ".join(str(p) for p in paths) for paths in (a_paths, b_paths)]
    print(f"| games in common | A: {names[0]} | B: {names[1]} | A - B +- paired SE |")
    print("|---|---|---|---|")
    print(f"| {c['n']} | {c['a']:.2f} | {c['b']:.2f} | {c['diff']:+.2f} +- {c['se']:.2f} |")
    if c["only_a"] or c["only_b"]:
        print(f"(unpaired, left out: {c['only_a']} games of A, {c['only_b']} of B)")
    keys = sorted(set(a) & set(b))
    for name, games in (("A", a), ("B", b)):
        clocks = time_summary([games[k] for k in keys])
        c[f"time_{name.lower()}"] = clocks
        if clocks is not None:
            k = "-" if clocks["mean_k"] is None else f"{clocks['mean_k']:.1f}"
            print(
                f"{name}: {clocks['time_manager']} at time_settings {clocks['time_settings']}: "
                f"our mean time left {clocks['time_left']:.1f} +- {clocks['time_left_se']:.1f} s,"
                f" lost on time {clocks['time_losses']} of {clocks['n']}, our mean k {k}"
            )
    return c


def time_summary(rows: Sequence[dict]) -> dict | None:
    """The clocks of `--games-csv` rows of timed games (None: no timed game among them): the
    time managers and settings seen, n, our mean time left and its SE, our losses on time, our
    mean budget k (None: not reported)."""
    rows = [r for r in rows if r.get("time_settings")]
    if not rows:
        return None
    left = [float(r["time_left_ours"]) for r in rows]
    ks = [float(r["mean_k"]) for r in rows if r.get("mean_k")]
    return {
        "time_manager": " / ".join(sorted({r["time_manager"] for r in rows})),
        "time_settings": " / ".join(sorted({r["time_settings"] for r in rows})),
        "n": len(rows),
        "time_left": statistics.fmean(left),
        "time_left_se": standard_error(left),
        "time_losses": sum(int(r["lost_on_time"]) for r in rows),
        "mean_k": statistics.fmean(ks) if ks else None,
    }
