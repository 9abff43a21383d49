"""The experiment's files: records kept while their inputs match, each FPS's finished episodes."""

from __future__ import annotations

import collections
import json
from pathlib import Path


def _load(path: Path, inputs: dict) -> dict | None:
    """The record at `path` when it exists and was made with `inputs`."""
    if not path.exists():
        return None
    try:
        rec = json.loads(path.read_text())
    except ValueError:
        return None
    return rec if rec.get("inputs") == inputs else None


def _write_json(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(path)


#: What an episode line keeps of its session's final details.
_KEPT = ("episode_return", "frame", "reason", "stats")


def _line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _append(episodes: Path, frames: Path, episode: dict, rows: list[dict]) -> None:
    """Appends one finished episode: its frame rows, then its episode line (which marks it
    finished: a crash between the two leaves rows that `_finished` drops)."""
    with frames.open("a") as f:
        f.writelines(_line(r) for r in rows)
    with episodes.open("a") as f:
        f.write(_line(episode))


def _finished(episodes: Path, frames: Path, inputs: dict) -> dict[int, tuple[dict, list[dict]]]:
    """The episodes of one FPS already played with `inputs`: seed -> (episode line, rows)."""
    if not episodes.exists() or not frames.exists():
        return {}
    lines = {}
    for text in episodes.read_text().splitlines():
        try:
            ep = json.loads(text)
        except ValueError:
            break  # a line cut short: the episodes after it were not finished
        if ep.get("inputs") == inputs and ep.get("seed") in inputs["seeds"]:
            lines[ep["seed"]] = ep
    rows: dict[int, list[dict]] = collections.defaultdict(list)
    for text in frames.read_text().splitlines():
        try:
            r = json.loads(text)
        except ValueError:
            continue
        if r.get("seed") in lines:
            rows[r["seed"]].append(r)
    return {seed: (ep, rows[seed]) for seed, ep in lines.items()}


def _rewrite(episodes: Path, frames: Path, done: dict[int, tuple[dict, list[dict]]]) -> None:
    """Rewrites both files of one FPS with the finished episodes only (none: no files)."""
    if not done:
        frames.unlink(missing_ok=True)
        episodes.unlink(missing_ok=True)
        return
    frames.write_text("".join(_line(r) for _, rows in done.values() for r in rows))
    episodes.write_text("".join(_line(ep) for ep, _ in done.values()))
