"""The Planner service on its own event-loop thread, for synchronous programs (tests, benches)."""

from __future__ import annotations

import asyncio
import threading

import grpc

from rtplan.planner_service import engine as eng
from rtplan.planner_service.server import STREAM_SEARCHES, create_server


class BackgroundService:
    """Serves an engine on a daemon thread that runs its own asyncio loop.

    The server is the real one (`create_server`); only where its loop runs differs from
    `python -m planner_service`. `start()` returns once every budget is compiled, so the
    first request pays no compile. Stopping keeps the engine: a new `BackgroundService` on the
    same engine and port starts at once (a planner restarted mid-game).
    """

    def __init__(
        self,
        engine: eng.Engine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_concurrent: int = 4,
        stream_searches: int = STREAM_SEARCHES,
    ) -> None:
        self.engine = engine
        self._host, self._port, self._max = host, port, max_concurrent
        self._stream_searches = stream_searches
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: grpc.aio.Server | None = None
        self.port: int | None = None

    @property
    def address(self) -> str:
        """host:port of the running service."""
        if self.port is None:
            raise RuntimeError("the service is not started")
        return f"{self._host}:{self.port}"

    def start(self, timeout: float = 600.0, *, compile: bool = True) -> BackgroundService:
        """Binds, starts and compiles (unless the engine is ready); returns self once SERVING.

        With `compile=False` it returns as soon as it listens (Health NOT_SERVING until the
        caller runs `engine.compile()`)."""
        if self._loop is not None:
            raise RuntimeError("the service is already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="planner-service", daemon=True
        )
        self._thread.start()
        self._server, self.port = self._run(self._start(), timeout)
        if compile and not self.engine.ready:
            self.engine.compile()
        return self

    async def _start(self) -> tuple[grpc.aio.Server, int]:
        server, port = create_server(
            self.engine,
            host=self._host,
            port=self._port,
            max_concurrent=self._max,
            stream_searches=self._stream_searches,
        )
        await server.start()
        return server, port

    def _run(self, coro, timeout: float):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self, grace: float | None = None) -> None:
        """Stops serving (open calls get `grace` seconds) and ends the loop thread."""
        if self._loop is None:
            return
        try:
            if self._server is not None:
                self._run(self._server.stop(grace), 30.0)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
            self._loop = self._server = None

    def __enter__(self) -> BackgroundService:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
