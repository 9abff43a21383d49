"""The web demo's first minutes: `rtplan demo` from a cold compile cache, timed to the showcase's
first games.

Usage: python -m bench.demo_start [--games 20] [--cache DIR] [--csv bench/results/demo_start.csv]

Runs `rtplan demo --port 0` with XDG_CACHE_HOME in a new empty folder (nothing compiled: the
JAX compile cache lives there; `--cache DIR` reuses one instead, for a warm start) and reads its
lines and its REST API until the showcase's `--games` games have ended. Prints: seconds to the
lobby's address, to the showcase's gate planning ("GAME gate ready") and to its first frame
(the first session's frame 1), the share of fallback frames (no planned action by the frame's
deadline) over those games, their mean return +- SE, and the machine's load average (1 min)
over the run. Appends one row to `--csv`.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._common import RESULTS, ROOT, append_rows, git_commit, utc_now
from rtplan.harness.stats import standard_error
from rtplan.processes import http_json

FIELDS = (
    "date", "commit", "cache", "games", "lobby_s", "gate_ready_s", "first_frame_s", "frames",
    "fallback", "fallback_share", "mean_return", "se_return", "load_min", "load_mean",
    "load_max", "per_game_fallback",
)  # fmt: skip

_LOBBY = re.compile(r"rtplan demo: lobby at (http://\S+?)/? ")
_GAME = re.compile(r"^game (\d+): (\S+)/watch\?session=(\S+)$")
_GATE_READY = re.compile(r"rtplan demo: (\S+) gate ready in ")
_PROGRESS = re.compile(r"rtplan demo: \S+ (compiling|gate ready|ready) ")


class _Demo:
    """`rtplan demo` as a child whose lines are timed from its start."""

    def __init__(self, env: dict[str, str], record_dir: Path) -> None:
        argv = [sys.executable, "-m", "rtplan", "demo", "--port", "0"]
        argv += ["--record-dir", str(record_dir)]
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append((time.monotonic() - self.start, line.rstrip()))
                self._cond.notify_all()

    def wait(self, pattern: re.Pattern, timeout: float = 1800.0) -> tuple[float, re.Match]:
        """(seconds since the start, match) of the first line `pattern` finds."""
        end, seen = time.monotonic() + timeout, 0
        with self._cond:
            while True:
                for at, line in self.lines[seen:]:
                    found = pattern.search(line)
                    if found:
                        return at, found
                seen = len(self.lines)
                if self.proc.poll() is not None:
                    tail = "\n".join(line for _, line in self.lines[-20:])
                    raise RuntimeError(f"rtplan demo exited ({self.proc.returncode}):\n{tail}")
                if time.monotonic() > end:
                    raise TimeoutError(f"no line matching {pattern.pattern!r}")
                self._cond.wait(0.5)

    def sessions(self) -> list[str]:
        with self._cond:
            return [m.group(3) for _, line in self.lines if (m := _GAME.match(line))]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class _Load:
    """The 1-minute load average, sampled every `every` seconds on a thread."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._every = every
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self._every)

    def stop(self) -> tuple[float, float, float]:
        self._stop.set()
        s = self.samples or [float("nan")]
        return min(s), sum(s) / len(s), max(s)


def _ended(base: str, sid: str, timeout: float = 1800.0) -> dict:
    end = time.monotonic() + timeout
    while True:
        info = http_json("GET", f"{base}/v1/sessions/{sid}")
        if info["status"] not in ("waiting", "running"):
            return info
        if time.monotonic() > end:
            raise TimeoutError(f"session {sid} did not end in {timeout:.0f} s")
        time.sleep(1.0)


def measure(games: int, cache: Path | None) -> dict:
    """One demo start, timed over the showcase's first `games` games (see the module doc)."""
    with tempfile.TemporaryDirectory(prefix="rtplan-demo-start-") as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": str(cache or Path(tmp) / "cache")}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        env.pop("RTPLAN_COMPILE_CACHE", None)
        load = _Load()
        demo = _Demo(env, Path(tmp) / "replays")
        try:
            lobby_s, found = demo.wait(_LOBBY)
            base = found.group(1)
            print(f"lobby at {lobby_s:.1f} s", flush=True)
            gate_s, _ = demo.wait(_GATE_READY)
            print(f"showcase gate ready at {gate_s:.1f} s", flush=True)
            demo.wait(_GAME)
            first = demo.sessions()[0]
            while (info := http_json("GET", f"{base}/v1/sessions/{first}"))["frame"] < 1:
                time.sleep(0.05)
            first_frame_s = time.monotonic() - demo.start
            print(f"first frame at {first_frame_s:.1f} s", flush=True)
            ended = []
            while len(ended) < games:
                sids = demo.sessions()
                if len(sids) <= len(ended):
                    time.sleep(1.0)
                    continue
                info = _ended(base, sids[len(ended)])
                ended.append(info)
                stats = info["stats"]
                print(
                    f"game {len(ended)}: ended at {time.monotonic() - demo.start:.0f} s, return "
                    f"{info['episode_return']:.1f}, frames {stats['frames']}, fallback "
                    f"{stats['fallback']}",
                    flush=True,
                )
        finally:
            demo.stop()
            low, mean_load, high = load.stop()
            # When the other games compiled: what the showcase's games overlapped.
            for at, line in demo.lines:
                if _PROGRESS.search(line):
                    print(f"{at:6.0f} s  {line}", flush=True)
    frames = sum(g["stats"]["frames"] for g in ended)
    fallback = sum(g["stats"]["fallback"] for g in ended)
    returns = [g["episode_return"] for g in ended]
    return {
        "date": utc_now(),
        "commit": git_commit(short=True),
        "cache": "warm" if cache else "cold",
        "games": games,
        "lobby_s": round(lobby_s, 1),
        "gate_ready_s": round(gate_s, 1),
        "first_frame_s": round(first_frame_s, 1),
        "frames": frames,
        "fallback": fallback,
        "fallback_share": round(fallback / max(frames, 1), 4),
        "mean_return": round(sum(returns) / len(returns), 1),
        "se_return": round(standard_error(returns), 1),
        "load_min": round(low, 2),
        "load_mean": round(mean_load, 2),
        "load_max": round(high, 2),
        "per_game_fallback": " ".join(
            f"{g['stats']['fallback'] / max(g['stats']['frames'], 1):.3f}" for g in ended
        ),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--games", type=int, default=20, help="the showcase's games to time")
    p.add_argument("--cache", type=Path, default=None, help="XDG_CACHE_HOME (default: empty)")
    p.add_argument("--csv", type=Path, default=RESULTS / "demo_start.csv")
    args = p.parse_args()
    # Stopped (a background job ignores SIGINT): the demo and its services stop with it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    row = measure(args.games, args.cache)
    print(
        f"lobby {row['lobby_s']} s, gate ready {row['gate_ready_s']} s, first frame "
        f"{row['first_frame_s']} s; {row['games']} games: fallback frames "
        f"{100 * row['fallback_share']:.1f}% ({row['fallback']}/{row['frames']}), return "
        f"{row['mean_return']} +- {row['se_return']}; load (1 min) {row['load_min']}-"
        f"{row['load_max']} (mean {row['load_mean']})"
    )
    append_rows(args.csv, [row], FIELDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
