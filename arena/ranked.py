"""What a ranked run is: its games, its tiers and its pre-registered seed sets (pure rules).

A ranked run plays every seed of one seed set, in an order of its own, on one game at one tier,
in real time through the Env API. Every agent plays the same seeds, so any two runs of a game,
tier and seed set compare seed by seed (paired). docs/preregistration.md records the seed sets;
the arena's seeds lie in their own range, disjoint from the train, tuning, eval and holdout
splits (`planner.episodes.SEED_RANGES`; tests/arena/test_ranked_rules.py ties them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: The games ranked runs play: the real-time (committed-action) games. The clock games' rated
#: matches are another protocol (two players on a chess clock).
GAMES = ("pacman-rt-v0", "tetris-rt-v0", "snake-rt-v0")

#: The arena's seeds: [3,000,000, 3,500,000), after the holdout split's.
SEED_RANGE = range(3_000_000, 3_500_000)


@dataclass(frozen=True)
class Tier:
    """A frame rate ranked runs are played at."""

    name: str
    fps: float


#: The standard tier plays at the env server's default frame rate (the game's standard, 9 FPS:
#: a frame of 111 ms); the fast tier at 30 FPS (33 ms), where less thinking fits a frame.
TIERS = {"standard": Tier("standard", 9.0), "fast": Tier("fast", 30.0)}


@dataclass(frozen=True)
class SeedSet:
    """A pre-registered set of ranked episodes: the same seeds for every game.

    Attributes:
        name: its name, stored with each run.
        first_seed: episode i plays seed `first_seed + i`.
        episodes: episodes in a run.
        max_frames: each episode stops after this many frames (if the game has not ended): a
            run of the standard tier takes at most episodes * max_frames / 9 seconds.
    """

    name: str
    first_seed: int
    episodes: int
    max_frames: int

    def seed(self, episode: int) -> int:
        if not 0 <= episode < self.episodes:
            raise ValueError(f"episode {episode} is not in [0, {self.episodes})")
        return self.first_seed + episode

    @property
    def seeds(self) -> range:
        return range(self.first_seed, self.first_seed + self.episodes)


#: The ranked seed sets. "ranked-v1" is the leaderboard's: 20 episodes of at most 200 frames
#: (a standard run takes at most 7.4 minutes). "smoke" is 2 episodes of 30 frames, for trying
#: the protocol and for tests: its runs rank only against each other (a leaderboard is per
#: game, tier and seed set).
SEED_SETS = {
    "ranked-v1": SeedSet("ranked-v1", 3_000_000, 20, 200),
    "smoke": SeedSet("smoke", 3_100_000, 2, 30),
}


#: The reference players the arena enters itself, each built into the env server: the
#: policy-only player (the network's argmax every frame, no search), the planner at a fixed
#: budget k (`k1`, `k2`, ...: one the planner service plans), and the shipped gate.
REFERENCE_PLAYERS = ("policy-only", "gate", "k1", "k2", "k3", "k4", "k6", "k8")
#: Reference agents' names start so, and no one else's may (`Agents.register`).
REFERENCE_PREFIX = "rtplan-"


def player_session(player: str) -> dict:
    """The fields of an env server's session (POST /v1/sessions) that make `player` play it."""
    if player == "policy-only":
        return {"agent": "reflex"}
    if player == "gate":
        return {"agent": "planner"}
    if player in REFERENCE_PLAYERS:
        return {"agent": "planner", "k": int(player[1:])}
    raise ValueError(f"{player!r} is no reference player: one of {', '.join(REFERENCE_PLAYERS)}")


def seed_order(seed_set: SeedSet) -> list[int]:
    """The seed set's seeds in a fresh random order (a run's own, drawn from the system's
    entropy): which seed an episode plays is not told by its place in the run."""
    return random.SystemRandom().sample(list(seed_set.seeds), seed_set.episodes)


def next_episode(planned: int, finished: set[int]) -> int | None:
    """The episode a run plays next: the first of `planned` not `finished` (None: done)."""
    return next((i for i in range(planned) if i not in finished), None)
