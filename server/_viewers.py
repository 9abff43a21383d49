"""Viewer fan-out: one bounded queue per viewer, so a slow viewer drops frames, never a tick."""

from __future__ import annotations

from collections.abc import Callable

from rtplan.server._queue import DropOldestQueue

#: One websocket viewer's queue of JSON texts.
Viewer = DropOldestQueue[str]


class ViewerHub:
    """The viewers of one session."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 2:
            raise ValueError(f"viewer queues need >= 2 slots, got {maxsize}")
        self.maxsize = maxsize
        self._viewers: set[Viewer] = set()
        #: Frames lost by the viewers that left (the others count their own).
        self._dropped_by_gone = 0
        self.closed = False
        self._last: str | None = None
        #: The frame now out as broadcast (None: not rendered, as nobody watched): a new viewer
        #: starts from it, so a burst of joins costs no rendering on the loop that runs ticks.
        self._latest: str | None = None

    def __len__(self) -> int:
        return len(self._viewers)

    @property
    def dropped(self) -> int:
        """Frames lost to full viewer queues, over every viewer this session had."""
        return self._dropped_by_gone + sum(v.dropped for v in self._viewers)

    def join(self, render: Callable[[], str] | None = None) -> Viewer:
        """A new viewer; after the session ended it gets the last frame (the one broadcast, or
        `render`'s when nobody watched), the final message and the end, so that a page opened
        late still shows the final board."""
        viewer = Viewer(self.maxsize)
        if self.closed:
            if render is not None:
                viewer.put(self.current(render))
            if self._last is not None:
                viewer.put(self._last)
            viewer.close()
        else:
            self._viewers.add(viewer)
        return viewer

    def leave(self, viewer: Viewer) -> None:
        if viewer in self._viewers:
            self._viewers.discard(viewer)
            self._dropped_by_gone += viewer.dropped

    def broadcast(self, text: str) -> None:
        """Gives `text` to every viewer without waiting for any of them."""
        self._latest = text
        for viewer in self._viewers:
            viewer.put(text)

    def publish(self, render: Callable[[], str], *, shown: bool = False) -> None:
        """A new frame is out: rendered once and broadcast, or, while nobody watches, not
        rendered at all (the first viewer to join renders it, in `current`). `shown`: every
        viewer already has this frame (a tick group's frame 0, shown from the join on and out
        at its tick): only later joiners render it again."""
        if self._viewers and not shown:
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
        for viewer in list(self._viewers):
            if last is not None:
                viewer.put(last)
            viewer.close()
            self.leave(viewer)
