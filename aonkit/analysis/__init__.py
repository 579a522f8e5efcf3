"""Pure functions from trace tables to result tables.

Every public analysis is listed in :mod:`aonkit.analysis.catalog` (and in
``docs/analyses.md``). The native ones are reachable by name here, e.g.
``aonkit.analysis.kernel_stats``; the modules are imported on first use. The
HTA-compatible ones keep HTA's names and live in ``hta_compat``,
``hta_counters`` and ``hta_queues``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .catalog import ENTRIES, HTA_NAMES_KEPT
from .summary import TraceSummary, summarize  # noqa: F401 - eager: the common first call

_MODULES = {e.function.split(".")[0] for e in ENTRIES}
_WHERE = {e.function.rsplit(".", 1)[1]: e.function.rsplit(".", 1)[0] for e in ENTRIES
          if e.function.split(".")[0] not in HTA_NAMES_KEPT}
_WHERE = {k: v for k, v in _WHERE.items() if k not in _MODULES}  # collectives.collectives: through its module


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted({"TraceSummary", "summarize", *_WHERE})
