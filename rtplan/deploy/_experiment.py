"""What one deployment experiment plays (`Experiment`), and the FPS ladder it climbs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One deployment experiment: what is played, where and how often."""

    #: The game id (a committed-action game the services serve).
    game: str
    #: Frame rates played, in order.
    fps: tuple[float, ...]
    #: Full episodes per FPS, on the first evaluation seeds.
    episodes: int
    #: A forced budget; None: the gate picks each option's k.
    k: int | None = None
    #: Frames per episode at most (0: to the episode's end).
    max_frames: int = 0
    #: Continue the FPS ladder past `fps` until the miss rate passes this (None: stop there).
    until_miss_rate: float | None = None
    #: Replay an FPS whose summary exists with the same inputs.
    force: bool = False

    @property
    def agent(self) -> str:
        """ "gate", or "k<K>" for a forced budget."""
        return "gate" if self.k is None else f"k{self.k}"

    @property
    def seeds(self) -> np.ndarray:
        """`[episodes]` the evaluation seeds (`planner.episodes.seeds_of`)."""
        from rtplan.planner.episodes import seeds_of

        return seeds_of("eval", self.episodes)


def fps_name(fps: float) -> str:
    """The file stem of one FPS: "fps_9", "fps_12.5"."""
    return f"fps_{fps:g}"


def fps_ladder(given: Sequence[float]) -> tuple[float, float]:
    """(the FPS after the given ones, the step): the list's last spacing, else 1."""
    step = given[-1] - given[-2] if len(given) >= 2 and given[-1] > given[-2] else 1.0
    return given[-1] + step, step
