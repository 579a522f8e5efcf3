"""Annotation ranges (NVTX, ``record_function``) projected onto the GPU work launched inside them.

A range's *projection* is the GPU time of the kernels, memcpys and memsets
whose launch call (runtime/driver API, matched by correlation) lies inside the
range on the same thread, nested ranges included, as Nsight Systems'
``nvtx_gpu_proj_trace`` / ``nvtx_gpu_proj_sum`` recipes report it:

``proj_start_ns`` / ``proj_end_ns``
    start of the first and end of the last such GPU event;
``proj_dur_ns``
    ``proj_end_ns - proj_start_ns`` (0 when the range launched nothing);
``gpu_ops`` / ``gpu_ns``
    how many GPU events, and the sum of their durations.

A launch is inside a range when the range starts no later and ends no earlier
than the call (interval nesting per thread). Ranges that never ended
(``dur_ns = -1``) and start/end ranges that partly overlap others are not
containers. Works on Kineto traces (``user_annotation``) and nsys exports
(NVTX ranges) alike.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import op_stack
from .correlation import gpu_links

_COLUMNS = ["row", "name", "pid", "tid", "ts_ns", "dur_ns", "proj_start_ns", "proj_end_ns", "proj_dur_ns",
            "gpu_ops", "gpu_ns"]


def range_projection(trace: Trace, categories: Iterable[str] = ("user_annotation",)) -> pd.DataFrame:
    """One row per annotation range with its GPU projection (see module doc).

    Parameters
    ----------
    trace : Trace
        Kineto or nsys input.
    categories : iterable of str
        Event categories that count as ranges.

    Returns
    -------
    pandas.DataFrame
        Columns ``row`` (event row), ``name``, ``pid``, ``tid``, ``ts_ns``,
        ``dur_ns``, ``proj_start_ns``, ``proj_end_ns`` (-1 when nothing was
        launched), ``proj_dur_ns``, ``gpu_ops``, ``gpu_ns``; in range start order.
    """
    from .._kernels.projection import project_up

    ev = trace.events
    cats = frozenset(categories)
    rows, parent, _ = op_stack(trace)
    is_range = ev["cat"].isin(cats).to_numpy()[rows] & (ev["ph"] == "X").to_numpy()[rows]
    links = gpu_links(trace)
    pos = np.searchsorted(rows, links["launch_row"].to_numpy())
    pos = np.minimum(pos, max(len(rows) - 1, 0))
    ok = (links["launch_row"].to_numpy() >= 0) & (len(rows) > 0)
    ok &= rows[pos] == links["launch_row"].to_numpy() if len(rows) else ok
    launch_pos = np.where(ok, pos, -1).astype(np.int64)
    gpu = links["gpu_row"].to_numpy()
    ts = ev["ts_ns"].to_numpy()[gpu]
    end = ts + np.maximum(ev["dur_ns"].to_numpy()[gpu], 0)
    first, last, count, total = project_up(parent, is_range, launch_pos, ts, end)
    sel = np.flatnonzero(is_range)
    r = rows[sel]
    has = count[sel] > 0
    out = pd.DataFrame({
        "row": r, "name": ev["name"].to_numpy()[r], "pid": ev["pid"].to_numpy()[r], "tid": ev["tid"].to_numpy()[r],
        "ts_ns": ev["ts_ns"].to_numpy()[r], "dur_ns": ev["dur_ns"].to_numpy()[r],
        "proj_start_ns": np.where(has, first[sel], -1), "proj_end_ns": np.where(has, last[sel], -1),
        "proj_dur_ns": np.where(has, last[sel] - first[sel], 0), "gpu_ops": count[sel], "gpu_ns": total[sel],
    }, columns=_COLUMNS)  # fmt: skip
    return out.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def range_projection_summary(projection: pd.DataFrame) -> pd.DataFrame:
    """Per range name, like ``nvtx_gpu_proj_sum``: instances, total range and projected time, spread, GPU ops.

    Parameters
    ----------
    projection : pandas.DataFrame
        The output of :func:`range_projection` (its ``name``, ``dur_ns``, ``proj_dur_ns``, ``gpu_ops`` and
        ``gpu_ns`` columns are read), whole or filtered.

    Returns
    -------
    pandas.DataFrame
        ``name``, ``instances``, ``range_ns`` (sum of range durations),
        ``proj_ns`` (sum of projected durations), ``proj_mean_ns``,
        ``proj_median_ns``, ``proj_min_ns``, ``proj_max_ns``, ``proj_std_ns``
        (sample std, 0 for one instance), ``gpu_ops``, ``gpu_ns``, sorted by
        ``proj_ns`` descending.
        One row per distinct name (as str); ties in ``proj_ns`` by name ascending. Times are ns; ranges that
        never ended (``dur_ns`` -1) add 0 to ``range_ns``, and ranges that launched nothing count as
        instances with a projected duration of 0 in every ``proj_*`` figure. ``proj_mean_ns``,
        ``proj_median_ns`` and ``proj_std_ns`` are float.
    """
    p = projection.assign(name=projection["name"].astype(str), dur_ns=projection["dur_ns"].clip(lower=0))
    g = p.groupby("name", sort=False)
    out = pd.DataFrame({
        "instances": g.size(), "range_ns": g["dur_ns"].sum(), "proj_ns": g["proj_dur_ns"].sum(),
        "proj_mean_ns": g["proj_dur_ns"].mean(), "proj_median_ns": g["proj_dur_ns"].median(),
        "proj_min_ns": g["proj_dur_ns"].min(), "proj_max_ns": g["proj_dur_ns"].max(),
        "proj_std_ns": g["proj_dur_ns"].std(ddof=1).fillna(0.0), "gpu_ops": g["gpu_ops"].sum(),
        "gpu_ns": g["gpu_ns"].sum(),
    })  # fmt: skip
    return out.reset_index().sort_values(["proj_ns", "name"], ascending=[False, True], kind="stable",
                                         ignore_index=True)


__all__ = ["range_projection", "range_projection_summary", "schema"]
