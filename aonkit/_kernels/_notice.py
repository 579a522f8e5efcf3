"""A line on stderr when a kernel's first compilation on this machine takes a while.

Numba compiles each kernel on its first call and keeps it in its on-disk
cache; the trace parser alone takes about 26-30 s on a 2-core machine. A first
call that would otherwise sit silent says what is compiling once it has taken
``AONKIT_COMPILE_NOTICE`` seconds (default 2; ``0`` turns the notice off),
and how long it took. ``aonkit warmup`` compiles everything ahead.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from numba.core import event

_LABELS = {"trace_scan": "the trace parser", "dag": "the critical-path kernels", "pyramid": "the timeline kernels"}


def _label(dispatcher: object) -> str:
    fn = getattr(dispatcher, "py_func", None)
    module = getattr(fn, "__module__", "").rsplit(".", 1)[-1]
    name = f"{module}.{getattr(fn, '__name__', '?')}"
    return f"{_LABELS[module]} ({name})" if module in _LABELS else name


class CompileNotice(event.Listener):
    """Says what is compiling when a top-level compilation lasts more than ``after_s`` seconds."""

    def __init__(self, after_s: float, stream: object = None) -> None:
        self.after_s = after_s
        self.stream = stream
        self.depth = 0  # Numba holds its compiler lock for a whole compilation: no interleaving
        self.timer: threading.Timer | None = None
        self.started = 0.0
        self.said = False

    def _say(self, label: str) -> None:
        self.said = True
        print(f"aonkit: compiling {label} for this machine, once (`aonkit warmup` compiles every kernel ahead)...",
              file=self.stream or sys.stderr, flush=True)

    def on_start(self, ev: event.Event) -> None:
        if self.depth == 0:
            self.started, self.said = time.perf_counter(), False
            self.timer = threading.Timer(self.after_s, self._say, args=(_label(ev.data["dispatcher"]),))
            self.timer.daemon = True
            self.timer.start()
        self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        self.depth -= 1
        if self.depth == 0 and self.timer is not None:
            self.timer.cancel()
            self.timer = None
            if self.said:
                print(f"aonkit: compiled in {time.perf_counter() - self.started:.1f} s",
                      file=self.stream or sys.stderr, flush=True)


def install() -> CompileNotice | None:
    """Register the notice once per process (unless ``AONKIT_COMPILE_NOTICE=0``)."""
    global _INSTALLED
    if _INSTALLED is not None:
        return _INSTALLED
    try:
        after = float(os.environ.get("AONKIT_COMPILE_NOTICE", "2"))
    except ValueError:
        after = 2.0
    if after <= 0:
        return None
    _INSTALLED = CompileNotice(after)
    event.register("numba:compile", _INSTALLED)
    return _INSTALLED


_INSTALLED: CompileNotice | None = None
