"""``GPU_METRICS`` samples of an nsys export (``--gpu-metrics-devices``) as a samples table.

The samples table is long-form, one row per (time, device, metric), on the
events' clock (``utcEpochNs + timestamp``), like the live samplers' tables:

==========  ========  ==========================================================
column      dtype     meaning
==========  ========  ==========================================================
ts_ns       int64     absolute sample time in ns
device      int64     ``TARGET_INFO_GPU.id`` (``typeId & 0xFF``)
metric      category  metric name from ``TARGET_INFO_GPU_METRICS.metricName``
value       float64   the sampled value (often an integer percent)
==========  ========  ==========================================================

The two tables' layout is taken from third-party readers and nsys's
documentation (no export at hand has them): ``GPU_METRICS(timestamp, typeId,
metricId, value)`` and ``TARGET_INFO_GPU_METRICS(typeId, ..., metricId,
metricName)``, joined on (typeId, metricId); a metric without a name row is
called ``metric <id>``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..samplers import SAMPLE_COLUMNS
from .db import NsysDB

__all__ = ["SAMPLE_COLUMNS", "empty_samples", "read_gpu_metrics"]


def empty_samples() -> pd.DataFrame:
    """A samples table with no rows."""
    return pd.DataFrame({"ts_ns": np.empty(0, np.int64), "device": np.empty(0, np.int64),
                         "metric": pd.Categorical([]), "value": np.empty(0, np.float64)})


def read_gpu_metrics(db: NsysDB, t0_ns: int) -> pd.DataFrame | None:
    """The export's GPU metric samples, or None when it has no ``GPU_METRICS`` table."""
    if not db.has("GPU_METRICS", "timestamp", "typeId", "value"):
        return None
    metric_col = "metricId" if "metricId" in db.columns("GPU_METRICS") else "id"
    t = db.arrow(f'SELECT timestamp, typeId, "{metric_col}" AS metricId, CAST(value AS REAL) AS value '
                 "FROM GPU_METRICS WHERE timestamp IS NOT NULL ORDER BY timestamp")
    if t.num_rows == 0:
        return empty_samples()
    ts = t.column("timestamp").to_numpy().astype(np.int64) + t0_ns
    type_id = t.column("typeId").fill_null(-1).to_numpy().astype(np.int64)
    metric_id = t.column("metricId").fill_null(-1).to_numpy().astype(np.int64)
    value = t.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    names: dict[tuple[int, int], str] = {}
    if db.has("TARGET_INFO_GPU_METRICS", "typeId", "metricId", "metricName"):
        for ty, mid, name in db.query_rows("SELECT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS"):
            names[(int(ty), int(mid))] = str(name)
    key = (type_id << 32) | (metric_id & 0xFFFFFFFF)
    uniq, codes = np.unique(key, return_inverse=True)
    labels = [names.get((int(k) >> 32, int(k) & 0xFFFFFFFF), f"metric {int(k) & 0xFFFFFFFF}") for k in uniq]
    label_index = pd.Index(labels, dtype="str").unique()
    metric = pd.Categorical.from_codes(label_index.get_indexer(pd.Index(labels, dtype="str"))[codes],
                                       categories=label_index, validate=False)
    return pd.DataFrame({"ts_ns": ts, "device": type_id & 0xFF, "metric": metric, "value": value})
