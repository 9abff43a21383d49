"""The bounded outboxes the frame loop writes without waiting: viewers' and agent streams'."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import grpc

from rtplan.v1 import env_pb2

T = TypeVar("T")


class DropOldestQueue(Generic[T]):
    """A bounded queue whose writer never waits: a full queue loses its oldest item (counted).

    `close()` ends it after what is queued; its end marker (None, what `get` then returns) is
    never dropped, and items put after it are ignored.
    """

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[T | None] = asyncio.Queue(maxsize)
        #: Items lost to a full queue (the only count of them).
        self.dropped = 0
        self.closed = False

    def _make_room(self) -> bool:
        if not self._queue.full():
            return False
        self._queue.get_nowait()
        self.dropped += 1
        return True

    def put(self, item: T) -> bool:
        """Enqueues `item` at once; True if the oldest item was lost to make room."""
        if self.closed:
            return False
        lost = self._make_room()
        self._queue.put_nowait(item)
        return lost

    def close(self) -> None:
        """Ends the queue after what it holds (the end marker is never dropped)."""
        if self.closed:
            return
        self._make_room()
        self._queue.put_nowait(None)
        self.closed = True

    async def get(self) -> T | None:
        """The next item; None once the queue has ended."""
        return await self._queue.get()

    def get_nowait(self) -> T | None:
        return self._queue.get_nowait()

    def qsize(self) -> int:
        return self._queue.qsize()


class AgentLink(DropOldestQueue[env_pb2.ServerMessage]):
    """One connected agent stream's outbox."""

    def __init__(self, *, maxsize: int = 256, send_observation: bool = False) -> None:
        super().__init__(maxsize)
        #: Frames carry the observation planes (Join.send_observation).
        self.send_observation = send_observation

    def error(self, code: grpc.StatusCode, message: str) -> None:
        self.put(env_pb2.ServerMessage(error=env_pb2.Status(code=code.value[0], message=message)))
