"""Viewer fan-out: one bounded queue per viewer, so a slow viewer drops frames, never a tick."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Viewer:
    """One websocket viewer's queue of JSON texts (None ends the stream)."""

    def __init__(self, maxsize: int) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize)
        self.dropped = 0

    def offer(self, item: str | None) -> bool:
        """Enqueues without waiting; a full queue loses its oldest item. True if one was lost."""
        lost = False
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
            lost = True
        self.queue.put_nowait(item)
        return lost


class ViewerHub:
    """The viewers of one session."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 2:
            raise ValueError(f"viewer queues need >= 2 slots, got {maxsize}")
        self.maxsize = maxsize
        self._viewers: set[Viewer] = set()
        self.dropped = 0
        self.closed = False
        self._last: str | None = None
        #: The frame now out as broadcast (None: not rendered, as nobody watched): a new viewer
        #: starts from it, so a burst of joins costs no rendering on the loop that runs ticks.
        self._latest: str | None = None

    def __len__(self) -> int:
        return len(self._viewers)

    def join(self) -> Viewer:
        """A new viewer; after the session ended it gets the final message and the end."""
        viewer = Viewer(self.maxsize)
        if self.closed:
            if self._last is not None:
                viewer.offer(self._last)
            viewer.offer(None)
        else:
            self._viewers.add(viewer)
        return viewer

    def leave(self, viewer: Viewer) -> None:
        self._viewers.discard(viewer)

    def broadcast(self, text: str) -> None:
        """Gives `text` to every viewer without waiting for any of them."""
        self._latest = text
        for viewer in self._viewers:
            self.dropped += viewer.offer(text)

    def publish(self, render: Callable[[], str]) -> None:
        """A new frame is out: rendered once and broadcast, or, while nobody watches, not
        rendered at all (the first viewer to join renders it, in `current`)."""
        if self._viewers:
            self.broadcast(render())
        else:
            self._latest = None

    def current(self, render: Callable[[], str]) -> str:
        """The frame now out, as broadcast (rendered with `render` if it was not)."""
        if self._latest is None:
            self._latest = render()
        return self._latest

    def close(self, last: str | None = None) -> None:
        """Sends `last` (if any) and the end to every viewer."""
        if self.closed:
            return
        self.closed = True
        self._last = last
        for viewer in self._viewers:
            if last is not None:
                self.dropped += viewer.offer(last)
            viewer.offer(None)
        self._viewers.clear()
