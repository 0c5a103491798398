"""The worker's stop (issue 21): one event, set the moment the worker is asked to stop.

Why the lifespan's shutdown is too late to learn of it: both servers run it only after the
requests in flight are done. granian's worker turns SIGTERM/SIGINT into its own stop signal
(`loop.add_signal_handler`, granian/_signals.py), stops accepting, waits for every
connection task, and only then lets the lifespan shut down (granian/server/mp.py); uvicorn's
`Server.handle_exit` (installed with `signal.signal`) likewise waits for the connections
before the lifespan. A long poll held for 25 s would keep the worker up until the server's
kill timeout, then die unanswered.

So the app puts its own handler in front of the server's, at lifespan start-up: by then
both servers have installed theirs (granian after loading the app, uvicorn before it). The
handler sets the event and calls the server's handler, which stops the server as before.
Under an asyncio loop the server's Python-level handler is a no-op and the loop learns of
the signal from its wakeup fd, which the C-level handler writes whatever Python handler is
installed; uvloop's handler is its own method. Both are called as they were.

What reads the event: long polls answer at once with what they have (network/service.py),
ticket creation refuses before its upstream POST (tickets/service.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, FrameType | None], Any]


class Stopping:
    """Set once this worker is asked to stop; never cleared (a worker stops once)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._chained: dict[int, tuple[Handler, Handler]] = {}

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    async def pause(self, seconds: float, *others: asyncio.Future[Any]) -> None:
        """Wait up to `seconds`; less when the stop comes or one of `others` is done."""
        if self._event.is_set():
            return
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait(
                {stop, *others}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()

    def chain_signals(self) -> None:
        """In front of the server's SIGTERM and SIGINT handlers, from the loop's thread.

        Only in the main thread (the only one that may set a handler: a test serving the app
        from a thread has no signals to chain) and only where a handler is there to chain
        to: with none, the signal's default (ending the process) stays as it is."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for signum in SIGNALS:
            previous = signal.getsignal(signum)
            if not callable(previous):
                continue

            def handler(number: int, frame: FrameType | None, previous: Handler = previous) -> None:
                # A signal handler runs between two bytecodes of the loop's own thread: the
                # event is set from the loop, not here (and not at all once it is closed).
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._event.set)
                previous(number, frame)

            signal.signal(signum, handler)
            self._chained[signum] = (handler, previous)

    def unchain_signals(self) -> None:
        """The server's handlers back, where ours is still the one installed."""
        for signum, (handler, previous) in self._chained.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, previous)
        self._chained.clear()
