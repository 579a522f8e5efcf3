"""Each NVML reader of a sampler timed on its own (:meth:`aonkit.sources.nvml.NvmlSampler.time_readers`)."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd


def time_readers(sampler: Any, repeat: int = 20) -> pd.DataFrame:
    """Time each reader of a stopped ``sampler``: ``device``, ``metrics``, ``nvml_calls``, ``mean_us`` a read.

    GPM readers compute at every read here, as a due read does. A failing read is timed and otherwise ignored
    (the sampler records failures when it samples).

    Raises
    ------
    RuntimeError
        If the sampler is running.
    """
    if sampler._thread is not None:
        raise RuntimeError("stop the sampler before timing its readers")
    rows = []
    for gpu in sampler._gpus:
        for reader, _ in gpu.readers:
            hold = getattr(reader, "min_interval_s", None)
            if hold is not None:
                reader.min_interval_s = 0.0  # GPM: compute every time, as a due read does
            t0 = time.perf_counter()
            for _ in range(repeat):
                try:
                    reader.read(gpu.handle)
                except Exception:  # noqa: BLE001 - timing only
                    pass
            mean_us = (time.perf_counter() - t0) / repeat * 1e6
            if hold is not None:
                reader.min_interval_s = hold
            calls = getattr(reader, "calls", 2)  # GPM: a snapshot and a metrics computation
            rows.append((gpu.index, ",".join(reader.metrics), calls, mean_us))
    return pd.DataFrame(rows, columns=["device", "metrics", "nvml_calls", "mean_us"])
