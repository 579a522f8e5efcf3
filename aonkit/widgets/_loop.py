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
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop running (a script, a test): nothing to wait on
            self.fn()
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = loop.call_later(self.delay_s, self.fn)
