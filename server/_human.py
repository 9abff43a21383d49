"""The human player: a person on the watch page, whose key presses and clicks are actions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rtplan import games
from rtplan.server import _messages as messages
from rtplan.server._agent_api import AgentHost, Answer
from rtplan.server._agents import GrpcAgent
from rtplan.server._rules import Arrival, buffered_turn
from rtplan.server._runtime import AGENT_PLAYER


class HumanAgent(GrpcAgent):
    """A person playing from the watch page, under the same frame rules as an agent stream.

    The page sends `{"type": "action", "frame": n, "action": a}` over the session's websocket;
    the session judges it like an Env API `Action` (`Session.submit`: the frame window, then
    this mailbox), so a key not pressed by frame n's deadline makes frame n play the fallback
    (FALLBACK), and a press after it makes the report LATE. Clock games: the person's clock
    runs from the move's frame to the click. The game starts when the player's page joins
    (after the session's countdown). In a game whose record buffers turns (Pac-Man) a key
    illegal at its frame waits as `pending` and applies at the first frame where it is legal
    (`server._rules.buffered_turn`): the server holds it, since only the server knows the frame
    a turn becomes legal before its deadline (a page would learn it a round trip too late).
    A fair start (games without a clock): until the person's first action, a frame with none
    plays the game's reflex (a safe move: Snake turns from the wall it starts heading into)
    instead of its fallback; from the first key on (on time or late), the session's fallback
    rules as for any agent. Agents' sessions and the games' rules are unchanged.
    """

    kind = "human"

    def __init__(self, *, buffers_turns: bool = False) -> None:
        super().__init__()
        self.player_connected = False
        #: Illegal keys wait for a frame where they are legal (the game's record says so).
        self.buffers_turns = buffers_turns
        #: The buffered turn, or None.
        self.pending: int | None = None
        #: The person has sent an action (the fair start's reflex steers until then).
        self.acted = False

    def join_player(self) -> bool:
        """The player's page joined; False when another page is already playing."""
        if self.player_connected:
            return False
        self.player_connected = True
        self.attached()
        return True

    def leave_player(self) -> None:
        """The player's page left (the game goes on: its frames play the fallback)."""
        self.player_connected = False

    def receive(self, frame: int, arrival: Arrival) -> bool:
        self.acted = True
        return super().receive(frame, arrival)

    def came_late(self, frame: int, arrival: Arrival) -> None:
        # A key that missed its frame is still the person's first: the fair start ends with it.
        self.acted = True

    def answer(self, n: int, host: AgentHost) -> Answer:
        # A clock game's person has their own clock to spend: no reflex moves for them.
        safe = not self.acted and host.kind is not games.Kind.CLOCK
        arrivals = super().answer(n, host).arrivals
        if self.buffers_turns:
            arrivals, self.pending = buffered_turn(
                arrivals,
                self.pending,
                deadline=host.deadline,
                legal=host.info.legal,
                published_at=host.published_at,
            )
        # Before the person's first action the frame is the fair start's: the reflex plays it,
        # and its report says so ("reflex"), not a missed deadline ("fallback").
        return Answer(arrivals, "reflex" if safe and not arrivals else "human", safe_fallback=safe)

    def close(self) -> None:
        super().close()
        self.pending = None


def player_hello(
    game_spec: dict[str, Any], *, tick_ms: float, player: int
) -> messages.PlayerMessage:
    """The websocket JSON that tells the page it plays: how it gives actions (keys or clicks,
    from the game description's `view`, i.e. the game's registry record), its player id, and
    the clock tick in ms."""
    view = game_spec["view"]
    clicks = view["input"] == "click"
    return messages.player_message(player=player, clicks=clicks, keys=view["keys"], tick_ms=tick_ms)


#: Close codes of a viewer websocket whose client sent what no page sends (RFC 6455, 7.4.1).
CLOSE_UNSUPPORTED = 1003  # a binary message: the protocol is JSON text
CLOSE_INVALID = 1007  # not JSON, not an object, an unknown type, or a field of the wrong type
CLOSE_TOO_BIG = 1009  # above MAX_MESSAGE_BYTES
#: Longest message a page may send, in UTF-8 bytes (an action is ~50, a play ~80).
MAX_MESSAGE_BYTES = 4096
#: Most uvicorn reads of one message before it closes the socket itself (1009, its own reason):
#: a client cannot make the server hold megabytes to judge them.
MAX_READ_BYTES = 64 * 1024


class MalformedMessage(Exception):
    """A client message no page sends: the websocket closes with `code` and the message as its
    reason; the session and its other viewers go on."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        # A close frame's reason holds at most 123 bytes.
        self.reason = reason.encode()[:123].decode(errors="ignore")


class PlayerLink:
    """The player side of one watch-page websocket: `{"type": "play", "token": T}` makes the
    page the session's player (T is the session token); then each
    `{"type": "action", "frame": n, "action": a}` goes to `Session.submit` with its arrival
    time. Replies (the player hello, errors a person can act on: a wrong token, an illegal
    action) go out through `send`, in order with the frames; a malformed or oversized message
    raises `MalformedMessage` (the websocket closes)."""

    def __init__(self, session, send: Callable[[dict[str, Any]], None]) -> None:
        """
        Args:
            session: the `server.session.Session` the websocket watches.
            send: queues a JSON message to this page.
        """
        self.session = session
        self._send = send
        self.playing = False

    def _error(self, message: str, **about: int) -> None:
        self._send(messages.error_message(message, **about))

    def receive(self, text: str | bytes, at: float) -> None:
        """One message from the page, received at monotonic time `at`.

        Raises:
            MalformedMessage: binary, oversized, not a JSON object of a known type, or a field
                of the wrong type.
        """
        if isinstance(text, bytes):
            raise MalformedMessage(CLOSE_UNSUPPORTED, "binary message: send JSON text")
        size = len(text.encode(errors="replace"))
        if size > MAX_MESSAGE_BYTES:
            raise MalformedMessage(
                CLOSE_TOO_BIG, f"message of {size} bytes; at most {MAX_MESSAGE_BYTES}"
            )
        try:
            msg = json.loads(text)
        except ValueError:
            raise MalformedMessage(
                CLOSE_INVALID, 'not JSON: send {"type": "play" | "action", ...}'
            ) from None
        if not isinstance(msg, dict):
            raise MalformedMessage(CLOSE_INVALID, f"not a JSON object: {type(msg).__name__}")
        kind = msg.get("type")
        if kind == "play":
            token = msg.get("token")
            if not isinstance(token, str):
                raise MalformedMessage(CLOSE_INVALID, f"token must be a string, got {token!r}")
            self._play(token)
        elif kind == "action":
            self._action(msg, at)
        else:
            raise MalformedMessage(
                CLOSE_INVALID, f"unknown message type {kind!r}: expected 'play' or 'action'"
            )

    def _play(self, token: str) -> None:
        s = self.session
        if s.config.agent != "human":
            self._error(f"session {s.id} is played by the {s.config.agent} agent, not a person")
        elif not s.check_token(token):
            self._error(f"wrong token for session {s.id}: only its creator may play it")
        elif not s.live:
            self._error(f"session {s.id} is {s.status}")
        elif self.playing:
            self._error("this page already plays the session")
        elif not s.agent.join_player():
            self._error(f"another page already plays session {s.id}")
        else:
            self.playing = True
            spec = s.runtime.describe()
            self._send(player_hello(spec, tick_ms=s.tick_s * 1e3, player=AGENT_PLAYER))

    def _action(self, msg: dict, at: float) -> None:
        frame, action = msg.get("frame"), msg.get("action")
        for name, value in (("frame", frame), ("action", action)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise MalformedMessage(CLOSE_INVALID, f"{name} must be an integer, got {value!r}")
        if not self.playing:
            self._error('send {"type": "play", "token": ...} before actions')
            return
        error = self.session.submit(frame, action, at)
        if error is not None:
            self._error(error.message, frame=frame, action=action)

    def leave(self) -> None:
        """The page's websocket closed."""
        if self.playing:
            self.session.agent.leave_player()
            self.playing = False
