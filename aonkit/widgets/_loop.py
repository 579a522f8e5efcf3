"""Scheduling on the notebook kernel's event loop (callbacks must run there, not on other threads)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Debounce:
    """Call ``fn`` once, ``delay_s`` after the last of a burst of :meth:`__call__`.

    Uses the running asyncio loop (the IPython kernel's); with no loop running
    (a plain script, a test) the call happens at once.
    """

    def __init__(self, fn: Callable[[], None], delay_s: float) -> None:
        self.fn = fn
        self.delay_s = delay_s
        self._handle: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        self._request(self.delay_s)

    def _request(self, delay_s: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop running (a script, a test): nothing to wait on
            self.fn()
            return
        self._schedule(loop, delay_s)

    def _schedule(self, loop: asyncio.AbstractEventLoop, delay_s: float) -> None:
        self.cancel()  # a later request moves the call
        self._handle = loop.call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self.fn()

    @property
    def pending(self) -> bool:
        """True while a call is scheduled and has not run."""
        return self._handle is not None

    def cancel(self) -> None:
        """Drop a scheduled call."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def flush(self) -> None:
        """Make a scheduled call now (nothing when none is pending)."""
        if self._handle is not None:
            self._handle.cancel()
            self._fire()


class Latest(Debounce):
    """Call ``fn`` once for the requests that arrive together: ``delay_s`` after the first of them.

    Requests made while a call is scheduled join it (the call reads the latest values). While ``fn`` runs, the
    loop runs nothing else, so the requests that arrive meanwhile (a dragged slider's messages) come in together
    and make one call: a stream of requests is answered as fast as ``fn`` allows, the last one always, and never
    queues up. Unlike :class:`Debounce`, a steady stream is not starved. With no loop running (a plain script, a
    test) each request calls at once.
    """

    def soon(self) -> None:
        """A request that comes alone (a dropdown's choice, not a dragged slider's stream).

        The call is made as soon as the loop is free, not ``delay_s`` later; it joins a call already scheduled.
        """
        self._request(0.0)

    def _schedule(self, loop: asyncio.AbstractEventLoop, delay_s: float) -> None:
        if self._handle is None:  # a later request joins the call, and does not move it
            self._handle = loop.call_later(delay_s, self._fire)
