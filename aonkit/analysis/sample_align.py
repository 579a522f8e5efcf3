"""Whether a trace's GPU activity samples line up with its kernels: the clock check of live samples.

A sample of GPU activity (NVML's ``gpu_util_pct``, GPM's ``gpm_graphics_util_pct`` or ``gpm_sm_util_pct``,
an nsys export's ``GR Active`` / ``SM Active``) describes a window of time before its stamp; the trace says
which part of that window had a kernel running. :func:`sample_alignment` shifts the samples against the
kernels and finds the shift at which the two agree best (Pearson correlation of the metric with the kernels'
busy share of each window). Samples taken by ``aonkit.profile`` or the daemon beside a torch.profiler trace
share its clock, so the best shift should be under one sampling interval; a recording made on another
machine, or a clock that was stepped, shows its offset here.

>>> sample_alignment(aonkit.load("aon-profiles/run"))   # one row per GPU and metric   # doctest: +SKIP

``lag_ns > 0``: the samples are stamped late (a sample at ``t`` describes the kernels at ``t - lag_ns``).

Some metrics trail the kernels by the driver's own delay, whatever the clocks (measured on an H200, driver 580,
with ``bench/gpu_lag.py``): a GPM value describes the 100 ms that ended about 78 ms before the driver's last
refresh (every 100 ms), so a 10 Hz GPM sample trails by 78 to 178 ms; ``power_instant_w`` by about 25 to
40 ms; ``gpu_util_pct`` (averaged over the driver's own period) by 100 to 220 ms. :data:`EXPECTED_LAG_NS`
holds the expected part of that, and ``aligned`` is judged against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import schema
from ..errors import MissingInputError
from ..trace import Trace
from .summary import sorted_intervals

ACTIVITY_METRICS = ("gpm_graphics_util_pct", "gpm_sm_util_pct", "gpu_util_pct", "power_instant_w", "GR Active",
                    "SM Active")  # fmt: skip
"""Metrics that rise and fall with kernel activity, in the order :func:`sample_alignment` takes them
(``power_instant_w``: the GPU's power a few tens of ms back, which follows its activity with the least delay
of NVML's readings: the clock check where GPM's delay is in doubt)."""

EXPECTED_LAG_NS = {"gpm_graphics_util_pct": 128_000_000, "gpm_sm_util_pct": 128_000_000}
"""The lag the driver alone puts between the kernels and a sample stamped when it was read: GPM's 78 ms plus
half its 100 ms refresh period (measured on an H200, driver 580; module doc). Other metrics: 0 (NVML's
``gpu_util_pct`` varies with the driver's averaging period, so it has none to expect; nsys's GPU metrics are
stamped by the hardware)."""

MIN_R = 0.5
"""The correlation below which a best shift says nothing (the samples do not follow the kernels): not aligned."""

ALIAS_R = 0.01
"""Peaks of the correlation this close to the best are aliases of one another (a workload that repeats every
step correlates as well a step earlier or later): the one nearest the expected lag is taken."""

COLUMNS = ("device", "trace_device", "metric", "windows", "interval_ns", "lag_ns", "expected_lag_ns", "r", "r_zero",
           "aligned")  # fmt: skip


def _windows(ts: np.ndarray, window_ns: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """Each sample's window ``(w0, w1)`` and the median sampling interval; a sampling gap leaves its window out."""
    ts = np.unique(ts)
    if ts.size < 2:
        return ts[:0], ts[:0], -1
    step = np.diff(ts)
    interval = int(np.median(step))
    if window_ns is not None:
        return ts - int(window_ns), ts, interval
    keep = step <= 3 * interval  # a gap (sampler paused, a lost GPU) is not one window
    return ts[:-1][keep], ts[1:][keep], interval


def _busy(trace: Trace, device: int) -> tuple[np.ndarray, np.ndarray]:
    from .._kernels.busy_windows import merge_intervals

    k = trace.kernels
    return merge_intervals(*sorted_intervals(k[k["device"].to_numpy() == device]))


def _span(trace: Trace) -> tuple[int, int]:
    ev = trace.events
    ts, dur = ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy()
    ok = (ts != schema.TS_MISSING) & (dur >= 0)
    return (int(ts[ok].min()), int((ts[ok] + dur[ok]).max())) if ok.any() else (0, -1)


def _correlation(busy: np.ndarray, width: np.ndarray, value: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Pearson r of the busy share and the value over each row's valid windows (NaN: fewer than 3, or flat)."""
    share = busy / width
    n = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ms = np.where(valid, share, 0.0).sum(axis=1) / n
        mv = np.where(valid, value, 0.0).sum(axis=1) / n
        ds = np.where(valid, share - ms[:, None], 0.0)
        dv = np.where(valid, value - mv[:, None], 0.0)
        r = (ds * dv).sum(axis=1) / np.sqrt((ds * ds).sum(axis=1) * (dv * dv).sum(axis=1))
    r[(n < 3) | ~np.isfinite(r)] = np.nan
    return r


def _pairs(trace: Trace, samples: pd.DataFrame, devices: Mapping[int, int] | None) -> list[tuple[int, int]]:
    """(sample device, trace device) pairs: as given, else the one GPU of each, else equal indexes."""
    on_trace = sorted(int(d) for d in pd.unique(trace.kernels["device"]) if d >= 0)
    sampled = sorted(int(d) for d in pd.unique(samples["device"]) if d >= 0)
    if devices is not None:
        return [(int(s), int(t)) for s, t in devices.items()]
    if len(on_trace) == 1 and len(sampled) == 1:
        return [(sampled[0], on_trace[0])]
    return [(d, d) for d in sampled if d in on_trace]


def alignment_curve(trace: Trace, metrics: Sequence[str] | None = None, *, max_lag_ns: int | None = None,
                    step_ns: int | None = None, window_ns: int | None = None,
                    devices: Mapping[int, int] | None = None,
                    expected_lag_ns: Mapping[str, int] | None = None) -> pd.DataFrame:  # fmt: skip
    """Correlation of each activity metric with the kernels' busy share at each trial shift.

    Parameters are those of :func:`sample_alignment`. Returns a long table ``device``, ``trace_device``,
    ``metric``, ``lag_ns``, ``r``, ``windows`` (the windows inside the trace at that shift), ``interval_ns``.
    """
    from .._kernels.busy_windows import lagged_busy

    expected = EXPECTED_LAG_NS if expected_lag_ns is None else expected_lag_ns
    samples = trace.samples
    if samples is None or samples.empty:
        raise MissingInputError("the trace has no samples: record with aonkit.profile, or add them with "
                                "trace.with_samples")
    names = [str(m) for m in pd.unique(samples["metric"])]
    metrics = [m for m in ACTIVITY_METRICS if m in names] if metrics is None else list(metrics)
    if not metrics:
        raise MissingInputError(f"the trace's samples have none of the GPU activity metrics {list(ACTIVITY_METRICS)}; "
                         f"they have {sorted(names)}")
    unknown = [m for m in metrics if m not in names]
    if unknown:
        raise MissingInputError(f"the trace's samples have no metric {unknown}; they have {sorted(names)}")
    span0, span1 = _span(trace)
    parts = []
    for device, trace_device in _pairs(trace, samples, devices):
        ms, me = _busy(trace, trace_device)
        for metric in metrics:
            rows = samples[(samples["device"].to_numpy() == device) & (samples["metric"] == metric).to_numpy()]
            w0, w1, interval = _windows(rows["ts_ns"].to_numpy(np.int64), window_ns)
            if w0.size == 0:
                continue
            step = int(step_ns) if step_ns is not None else max(1_000, interval // 20)
            reach = int(max_lag_ns) if max_lag_ns is not None else 5 * max(interval, 1) + expected.get(metric, 0)
            half = reach // step
            lags = np.arange(-half, half + 1, dtype=np.int64) * step
            value = rows.groupby("ts_ns", sort=True)["value"].last().reindex(w1).to_numpy(np.float64)
            busy = lagged_busy(ms, me, np.ascontiguousarray(w0), np.ascontiguousarray(w1), lags)
            valid = (w0[None, :] - lags[:, None] >= span0) & (w1[None, :] - lags[:, None] <= span1)
            valid &= np.isfinite(value)[None, :]
            r = _correlation(busy.astype(np.float64), (w1 - w0).astype(np.float64), value, valid)
            parts.append(pd.DataFrame({"device": device, "trace_device": trace_device, "metric": metric,
                                       "lag_ns": lags, "r": r, "windows": valid.sum(axis=1),
                                       "interval_ns": interval}))  # fmt: skip
    if not parts:
        return pd.DataFrame({c: [] for c in ("device", "trace_device", "metric", "lag_ns", "r", "windows",
                                             "interval_ns")})  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def _best_shift(lag: np.ndarray, r: np.ndarray, due: int) -> int:
    """Index of the best shift (-1 when no shift has a correlation).

    The highest peak of ``r``, or of the peaks within :data:`ALIAS_R` of it (a periodic workload's aliases, a
    period apart), the one nearest ``due``; ties to the smaller shift, the later one first.
    """
    if not np.isfinite(r).any():
        return -1
    v = np.where(np.isfinite(r), r, -np.inf)
    pad = np.concatenate(([-np.inf], v, [-np.inf]))
    peak = (v >= pad[:-2]) & (v >= pad[2:]) & (v >= v.max() - ALIAS_R)
    order = np.lexsort((lag < 0, np.abs(lag), np.abs(lag - due)))
    return int(order[peak[order]][0])


def sample_alignment(trace: Trace, metrics: Sequence[str] | None = None, *, max_lag_ns: int | None = None,
                     step_ns: int | None = None, window_ns: int | None = None,
                     devices: Mapping[int, int] | None = None,
                     expected_lag_ns: Mapping[str, int] | None = None) -> pd.DataFrame:  # fmt: skip
    """How far apart in time a trace's GPU activity samples and its kernels are.

    Parameters
    ----------
    trace : Trace
        A trace with samples (``aonkit.load`` of a profile bundle, or ``trace.with_samples(...)``) and kernels.
    metrics : sequence of str, optional
        Sample metrics to check (default: those of :data:`ACTIVITY_METRICS` the samples have).
    max_lag_ns : int, optional
        Largest shift tried either way (default five sampling intervals, plus the metric's
        :data:`EXPECTED_LAG_NS`).
    step_ns : int, optional
        Spacing of the shifts tried (default a twentieth of the sampling interval, at least 1 µs): the
        resolution of ``lag_ns``.
    window_ns : int, optional
        Length of the time a sample describes, ending at its stamp. Default: since the previous sample, as
        GPM metrics and CPU shares are measured. NVML's ``gpu_util_pct`` is averaged by the driver over its own
        period (1/6 s to 1 s, by product), which biases the lag unless given here. NVML refreshes GPM metrics
        every 100 ms: sampled faster, a GPM value repeats until the next refresh, so check GPM at 10 Hz.
    devices : mapping of int to int, optional
        Sample device -> trace device (default: the one GPU of each, else equal indexes; NVML and CUDA number
        GPUs alike unless ``CUDA_VISIBLE_DEVICES`` reorders them).
    expected_lag_ns : mapping of str to int, optional
        Metric -> the lag its source alone causes (default :data:`EXPECTED_LAG_NS`; ``{}``: none).

    Returns
    -------
    pandas.DataFrame
        One row per (device, metric): ``windows`` (samples compared at zero shift), ``interval_ns`` (median
        sampling interval), ``lag_ns`` (the best shift; ``> 0``: samples stamped late; NaN when no shift gives a
        correlation, as when the GPU was busy or idle throughout), ``r`` (correlation at ``lag_ns``),
        ``expected_lag_ns`` (the source's own delay), ``r_zero`` (at zero shift), ``aligned`` (``lag_ns`` within
        one interval of ``expected_lag_ns``, with ``r`` at least :data:`MIN_R`).

    Raises
    ------
    MissingInputError
        When the trace has no samples, or a metric asked for is not among them (a ``ValueError``).
    """
    curve = alignment_curve(trace, metrics, max_lag_ns=max_lag_ns, step_ns=step_ns, window_ns=window_ns,
                            devices=devices, expected_lag_ns=expected_lag_ns)  # fmt: skip
    expected = EXPECTED_LAG_NS if expected_lag_ns is None else expected_lag_ns
    rows = []
    for (device, trace_device, metric), g in curve.groupby(["device", "trace_device", "metric"], sort=False):
        lag, r = g["lag_ns"].to_numpy(), g["r"].to_numpy()
        zero = int(np.flatnonzero(lag == 0)[0])
        interval, due = int(g["interval_ns"].iloc[0]), int(expected.get(metric, 0))
        best = _best_shift(lag, r, due)
        rows.append({"device": device, "trace_device": trace_device, "metric": metric,
                     "windows": int(g["windows"].iloc[zero]), "interval_ns": interval,
                     "lag_ns": float(lag[best]) if best >= 0 else np.nan, "expected_lag_ns": due,
                     "r": r[best] if best >= 0 else np.nan, "r_zero": r[zero],
                     "aligned": bool(best >= 0 and abs(lag[best] - due) <= interval and r[best] >= MIN_R)})  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))
