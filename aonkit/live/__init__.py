"""The always-on daemon, its readers, and on-demand traces (see ``docs/daemon.md``).

>>> import aonkit.live                          # doctest: +SKIP
>>> r = aonkit.live.attach()                    # this user's daemon on this node (`aonkit daemon start`)
>>> frame, cursor = r.read(0)                   # the ring: a Sampler, so LiveMonitor(r) works
>>> r.last(minutes=10)                          # Parquet files and the ring, one table
>>> aonkit.live.serve()                         # in a training process: `aonkit trace PID --steps 3` may trace it
>>> aonkit.live.history("/data/aonkit", hosts=["node7"], start="2026-12-01 10:00")   # the fleet Parquet

Importing this package is light: the reader, the daemon, the trace client and the fleet reader load on first use.
"""

from __future__ import annotations

from typing import Any

from .paths import DaemonNotRunning, LiveError, NotOwnerError, data_root, runtime_dir
from .serve import serve, step

_LAZY = {"attach": "reader", "LiveReader": "reader", "Daemon": "daemon", "run_trace": "trace",
         "load_traced_job": "trace", "aggregate": "fleet", "history": "fleet", "history_plan": "fleet"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DaemonNotRunning", "LiveError", "LiveReader", "NotOwnerError", "Daemon", "aggregate", "attach",
           "data_root", "history", "history_plan", "load_traced_job", "run_trace", "runtime_dir", "serve", "step"]
