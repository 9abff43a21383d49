"""What a session plays (`SessionConfig`), its option values, and the refusals (`SessionError`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc

from rtplan.v1 import env_pb2

AGENT_KINDS = ("grpc", "reflex", "planner", "human")
FALLBACKS = ("game", "reflex")
CLOCKS = ("real_time", "simulated")
OPPONENTS = ("reflex", "random", "planner", "gate")
#: Session statuses; the last three are final.
STATUSES = ("waiting", "running", "finished", "stopped", "failed")
LIVE = ("waiting", "running")

_HTTP = {
    grpc.StatusCode.INVALID_ARGUMENT: 422,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
}


class SessionError(Exception):
    """A refused request, with the gRPC code and HTTP status that say why."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return _HTTP.get(self.code, 400)

    def status(self) -> env_pb2.Status:
        """The protocol's `Status` (code is the google.rpc.Code number)."""
        return env_pb2.Status(code=self.code.value[0], message=self.message)


@dataclasses.dataclass(frozen=True)
class Pace:
    """A clock game's frame rate and time control (seconds a side + seconds back per move)."""

    fps: float
    time_s: float
    increment_s: float


#: A built-in agent's (reflex or planner) clock-game session in real time that names no frame
#: rate and no time control, as a person watches it (`SessionManager.resolve`): a ply shows
#: for one frame period at least, a second, so a 9x9 Go game (80-160 plies) or an 11x11 Hex
#: game lasts minutes, on a 1+1 clock (at 32 ticks a frame, 1,920 ticks a side and 32 back:
#: in the clock gate's trained range of T0s, and the planner never runs out on a loaded
#: machine). At the server's 9 FPS and the game's 300 ticks a game was over in ~6 s.
WATCHED = Pace(fps=1.0, time_s=60.0, increment_s=1.0)
#: A person's clock-game session in real time that names no frame rate and no time control:
#: 3+2 at 9 FPS, the lobby's default for a person (a game of minutes, as on chess sites). The
#: game's own 300 ticks at 32 ticks a frame were ~1 s of a person's thinking.
PLAYED = Pace(fps=9.0, time_s=180.0, increment_s=2.0)


@dataclasses.dataclass(frozen=True)
class SessionConfig:
    """What a session plays and how (validated by the manager)."""

    #: Registered game id.
    game_id: str
    #: Init seed (0 <= seed < 2**63): the session's first state is `game.init(PRNGKey(seed))`.
    seed: int = 0
    #: Frames per second (real-time clock); in simulated mode only the clock games' tick size.
    fps: float = 9.0
    #: "grpc" (an external agent over the Env API), "reflex" or "planner" (built in), or
    #: "human" (a person on the watch page: `server._human`).
    agent: str = "grpc"
    #: Planner agent: budgets of successive decisions, cycled (one value: a fixed k); empty:
    #: the planner service's gate picks each k (the service must have a gate for the game).
    ks: tuple[int, ...] = ()
    #: "game" (the game's fallback action) or "reflex" (the network's masked argmax).
    fallback: str = "game"
    #: Planner agent, committed-action games: what the frames before each planned action play
    #: (`planner.options.COMMITMENTS`): "reflex" (the env-side reflex), or "plan" (the last
    #: answer's plan while each of its actions is legal, then the reflex; the planner service
    #: must play the game under committed "plan", and each request carries the plan).
    committed: str = "reflex"
    #: "real_time" (fixed-FPS deadlines) or "simulated" (a frame waits for its answer).
    clock: str = "real_time"
    #: Write a replay file.
    record: bool = False
    #: Clock games: the built-in opponent (player 1), "reflex", "random", "planner" (the
    #: planner service searching at the fixed budget `opponent_k`, on its own clock) or "gate"
    #: (the planner service's clock gate picks each move's budget, on its own clock).
    opponent: str = "reflex"
    #: Planner opponent: its budget k, one of the game's budgets (0: no planner opponent).
    opponent_k: int = 0
    #: Stop after this many frames (0: play until the game ends).
    max_frames: int = 0
    #: Clock games in real time: each side's clock at the start, in seconds (0: the game's
    #: `initial_time` in ticks); converted at the session's tick (`server._rules.clock_ticks`).
    time_s: float = 0.0
    #: Clock games in real time: seconds given back after each move made on the clock with
    #: time left (a Fischer increment; "1+1" is time_s 60, increment_s 1).
    increment_s: float = 0.0
    #: A ranked episode's (the arena's): no API shows the seed before the session ends (its
    #: views show `seed: null`, its replay file appears when it ends), so the agent cannot look
    #: up what the seed decides. The state the agent plays from is the game's whole state, as
    #: always (docs/arena.md says what that reveals).
    sealed: bool = False
    #: An outside agent's session created over REST: stop it when no agent joined within this
    #: many seconds (0: wait for ever), so a slot a no-show holds comes back by itself.
    join_within_s: float = 0.0

    @property
    def period(self) -> float:
        """Seconds per frame."""
        return 1.0 / self.fps

    @property
    def simulated(self) -> bool:
        return self.clock == "simulated"

    @property
    def served(self) -> bool:
        """Its sides decide from `Game.served_state` (the reflex, the planner's root): in real
        time, where people watch (Speed Go passes only when the game should end); with the
        simulated clock they play the states themselves, as training and `rtplan eval` do."""
        return not self.simulated

    @property
    def gated(self) -> bool:
        """The planner agent lets the service's gate pick k (the session forces none)."""
        return self.agent == "planner" and not self.ks

    @property
    def opponent_plans(self) -> bool:
        """The clock games' opponent is the planner (at `opponent_k`, or gated): it thinks on
        its own clock, as the agent."""
        return self.opponent in ("planner", "gate")

    @property
    def opponent_gated(self) -> bool:
        """The clock games' opponent is the planner with the service's clock gate."""
        return self.opponent == "gate"

    def to_dict(self, *, reveal: bool = True) -> dict[str, Any]:
        """The settings as JSON; `reveal` False: a sealed session's seed is None."""
        d = dataclasses.asdict(self)
        d["ks"] = list(self.ks)
        if self.sealed and not reveal:
            d["seed"] = None
        return d
