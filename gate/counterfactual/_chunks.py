"""The chunked, resumable loop both kinds of counterfactual values run: one file per chunk."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rtplan.planner.episodes import seeds_of

__all__ = ["run_chunks"]


def run_chunks(
    folder: Path,
    *,
    head: Mapping[str, Any],
    seed: int,
    states: int,
    chunk: int,
    label: Callable[[int, np.ndarray], dict],
    summarize: Callable[[list[dict]], dict],
    fixed: Mapping[str, Any] | None = None,
    noun: str = "states",
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Labels train-range games `seed, seed+1, ...` (`states` of them) `chunk` at a time into
    `folder/chunk-<first>.json`, then writes `folder/summary.json`.

    A chunk file already there is kept when it holds the same number of games under the same
    planner (`head["planner_sha256"]`), so a rerun resumes; one under another planner is
    played again. A chunk that disagrees with `head` on a field of `fixed` (field -> the value
    a file without it holds) is refused: those values were measured under other rules.

    Args:
        folder: the run's folder (created).
        head: the first fields of every chunk file (game, planner, its sha256, the rules).
        seed, states, chunk: the games, `chunk` per file.
        label: `(first, seeds [n]) -> fields` of one chunk's games (its `"seeds"`: the games
            it kept); each file is `head`, `games`, these fields, `seconds` and `command`.
        summarize: the chunks read or written, in order -> the summary (written as
            `summary.json` and returned).
        fixed: the fields of `head` a resumed chunk must share.
        noun: what a chunk's kept games are called in the log ("states", "positions").
        command: the command line, recorded in every chunk.
        log: progress lines.

    Raises:
        ValueError: a seed outside the train range, or a chunk of other `fixed` rules.
    """
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for first in range(seed, seed + states, chunk):
        path = folder / f"chunk-{first:07d}.json"
        n = min(chunk, seed + states - first)
        if path.exists():
            part = json.loads(path.read_text())
            for name, default in (fixed or {}).items():
                if part.get(name, default) != head.get(name, default):
                    raise ValueError(
                        f"{path} was measured with {name}={part.get(name, default)!r}, this run "
                        f"with {head.get(name, default)!r}: chunks of other rules never mix "
                        "(use another --out, or delete the folder)"
                    )
            if part["planner_sha256"] == head["planner_sha256"] and part["games"] == n:
                parts.append(part)
                continue
        began = time.perf_counter()
        seeds = np.arange(first, first + n)
        if seeds[-1] >= seeds_of("tuning", 1)[0]:
            raise ValueError(f"the {noun} must come from train-range seeds")
        part = {**head, "games": n, **label(first, seeds)}
        part.update(seconds=time.perf_counter() - began, command=command)
        path.write_text(json.dumps(part) + "\n")
        parts.append(part)
        log(f"{path.name}: {len(part['seeds'])} {noun} in {part['seconds']:.0f} s")
    summary = summarize(parts)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
