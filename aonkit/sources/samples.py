"""Samples tables: the long form every sampler and source hands out, and the way samples reach a trace.

:func:`attach_samples` is that one path; the samplers are in :mod:`aonkit.sources.samplers`, which re-exports
these names.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from ..trace import Trace

# pandas is imported where a table is made, not here: the daemon samples in a process that never loads pandas.

HOST_DEVICE = -1
"""``device`` of host metrics (GPUs use their index)."""

PART_METRIC = re.compile(r"^(?P<base>.+?)(?:\.(?P<tag>gi\d+|\d+))?(?P<node>@r\d+)?$")
"""A metric of part of a device: ``<metric>.gi<G>`` (a MIG GPU instance) or ``<metric>.<pid>`` (a process); either
may end in ``@r<R>``: the node of rank ``R``, in a job's combined trace whose ranks ran on several nodes."""


def split_metric(metric: str) -> tuple[str, str]:
    """``("memory_used_bytes", "gi2")`` for ``memory_used_bytes.gi2``, ``(metric, "")`` for a whole device's.

    A node's suffix stays on the tag: ``("gpu_util_pct", "@r2")``, ``("memory_used_bytes", "gi2@r2")``.
    """
    m = PART_METRIC.match(metric)
    return (m["base"], (m["tag"] or "") + (m["node"] or "")) if m else (metric, "")


def part_label(device: int, tag: str) -> str:
    """``host``, ``GPU 1``, ``GPU 1 gi2`` (a MIG GPU instance), ``GPU 0 pid 7`` (a process); ``, node of rank 2``."""
    part, _, node = tag.partition("@r")
    where = "host" if device < 0 else f"GPU {device}"
    label = where + ("" if not part else f" {part}" if part.startswith("gi") else f" pid {part}")
    return label + (f", node of rank {node}" if node else "")


SAMPLE_COLUMNS = ("ts_ns", "device", "metric", "value")
"""Columns of a samples table: int64 ns, int64 device (-1: host), categorical metric name, float64 value."""


def samples_table(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a samples table: the :data:`SAMPLE_COLUMNS` only, with their dtypes, in time order.

    Raises
    ------
    ValueError
        When a column is missing.
    """
    import pandas as pd

    missing = [c for c in SAMPLE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"a samples table needs the columns {list(SAMPLE_COLUMNS)}; missing {missing}")
    metric = frame["metric"]
    if isinstance(metric.dtype, pd.CategoricalDtype):
        metric = metric.cat.rename_categories([str(c) for c in metric.cat.categories])
    else:
        metric = metric.astype(str).astype("category")  # categories sorted by name
    out = pd.DataFrame({
        "ts_ns": frame["ts_ns"].to_numpy(np.int64), "device": frame["device"].to_numpy(np.int64),
        "metric": metric.array, "value": frame["value"].to_numpy(np.float64),
    })  # fmt: skip
    return out.sort_values("ts_ns", kind="stable", ignore_index=True)


def attach_samples(trace: Trace, samples: pd.DataFrame | Any, *, replace: bool = False) -> pd.DataFrame:
    """Put live samples on ``trace.samples``, where the timeline and the cache find them.

    Parameters
    ----------
    trace : Trace
        The trace the samples were taken beside (same clock: ``time.time_ns()``).
    samples : pandas.DataFrame or Sampler
        A long-form table (``sampler.read()[0]``) or a sampler, whose samples
        still in its ring are all taken (``sampler.read(0)``).
    replace : bool
        Drop the trace's samples first; by default the new ones are added to
        them (e.g. host samples beside an nsys export's GPU metrics).

    Returns
    -------
    pandas.DataFrame
        ``trace.samples`` now: :data:`SAMPLE_COLUMNS`, in time order.

    Raises
    ------
    ValueError
        When the table lacks a column of :data:`SAMPLE_COLUMNS`.
    """
    import pandas as pd
    from pandas.api.types import union_categoricals

    new = samples_table(samples if isinstance(samples, pd.DataFrame) else samples.read(0)[0])
    if trace.samples is not None and not replace:
        old = samples_table(trace.samples)
        metric = union_categoricals([old["metric"].array, new["metric"].array], ignore_order=True)
        both = pd.concat([old.drop(columns="metric"), new.drop(columns="metric")], ignore_index=True)
        both.insert(2, "metric", metric)
        new = both.sort_values("ts_ns", kind="stable", ignore_index=True)
    trace.samples = new
    return new
