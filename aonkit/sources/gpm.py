"""GPM (GPU Performance Monitoring, Hopper and later) metrics of one GPU, from two NVML samples.

``nvmlGpmSampleGet`` takes a snapshot of the GPU's counters; ``nvmlGpmMetricsGet`` turns two snapshots into the
metrics over the time between them. A new value is computed once about ``min_interval_s`` (default 0.1 s) has
passed since the last snapshot (a quarter of :data:`REFRESH_S` early, so that a 10 Hz tick a little under 100 ms
after the last one still reads); reads in between repeat the last values.

What the driver does (measured on an H200, driver 580, ``bench/gpu_lag.py``):

- it refreshes the counters a snapshot copies every :data:`REFRESH_S` (100.0 ms, on its own timer), so two
  snapshots with no refresh between them are identical, and ``nvmlGpmMetricsGet`` then returns success and
  every metric exactly 0. A computation whose every value is exactly 0 within ``2 * REFRESH_S`` of the last
  snapshot is taken for that: the older snapshot is kept and the last values repeat. (On a live GPU the PCIe
  counters are never exactly 0: about 3 MB/s of the driver's own traffic when idle.)
- the values a refresh makes visible describe the 100 ms that ended about 78 ms before it, so a GPM sample
  stamped when it was read trails the kernels it describes by 78 ms plus the time since the last refresh:
  78 to 178 ms (:data:`aonkit.analysis.sample_align.EXPECTED_LAG_NS`).
- ``nvmlGpmMetricsGet`` costs about 1.5 ms of CPU a call whatever the number of metrics, against 60 us for a
  snapshot: GPM at 10 Hz is 1.5% of a core per GPU, at 1 Hz 0.15% (the daemon's default: ``--gpm-interval``).

:data:`GPM_METRICS` lists what is read (``gpm_`` + the NVML name, with its unit): ``core`` by default, ``all``
adds the media engines (NVDEC, NVJPG, NVOFA, NVENC), the memory caches and context switching. Left out: the
per-link NVLink and C2C bandwidths (the totals are in), and the counters NVML returns as totals since boot or as
cycle counts of the interval (``*_CYCLES_*``, ``*_CTXSW_REQUESTS``).
"""

from __future__ import annotations

import ctypes
import struct
import time
from typing import Any

from .nvml_direct import direct_calls
from .nvml_metrics import NAN, PartialRead, Unsupported

MIB = 1024.0 * 1024.0
REFRESH_S = 0.1
"""The driver's GPM refresh period (100.0 ms measured on an H200, driver 580)."""
METRIC = "4xId24x"
"""nvmlGpmMetric_t (nvml.h) for ``struct``: metricId (skipped), nvmlReturn, value, three name pointers (skipped)."""

# (name, NVML_GPM_METRIC_<suffix>, its id, scale to the unit in the name, group); ids are NVML's ABI (nvml.h),
# written out so that an older pynvml without the constant still works
GPM_METRICS: tuple[tuple[str, str, int, float, str], ...] = (
    ("gpm_graphics_util_pct", "GRAPHICS_UTIL", 1, 1.0, "core"),  # time any context was active
    ("gpm_sm_util_pct", "SM_UTIL", 2, 1.0, "core"),  # SM activity: share of SMs busy
    ("gpm_sm_occupancy_pct", "SM_OCCUPANCY", 3, 1.0, "core"),  # active warps / max warps
    ("gpm_integer_util_pct", "INTEGER_UTIL", 4, 1.0, "core"),
    ("gpm_tensor_util_pct", "ANY_TENSOR_UTIL", 5, 1.0, "core"),
    ("gpm_dfma_tensor_util_pct", "DFMA_TENSOR_UTIL", 6, 1.0, "core"),
    ("gpm_hmma_tensor_util_pct", "HMMA_TENSOR_UTIL", 7, 1.0, "core"),
    ("gpm_dmma_tensor_util_pct", "DMMA_TENSOR_UTIL", 8, 1.0, "core"),
    ("gpm_imma_tensor_util_pct", "IMMA_TENSOR_UTIL", 9, 1.0, "core"),
    ("gpm_dram_bw_util_pct", "DRAM_BW_UTIL", 10, 1.0, "core"),  # share of peak DRAM bandwidth
    ("gpm_fp64_util_pct", "FP64_UTIL", 11, 1.0, "core"),
    ("gpm_fp32_util_pct", "FP32_UTIL", 12, 1.0, "core"),
    ("gpm_fp16_util_pct", "FP16_UTIL", 13, 1.0, "core"),
    ("gpm_pcie_tx_bytes_per_s", "PCIE_TX_PER_SEC", 20, MIB, "core"),  # MiB/s in NVML
    ("gpm_pcie_rx_bytes_per_s", "PCIE_RX_PER_SEC", 21, MIB, "core"),
    ("gpm_nvlink_rx_bytes_per_s", "NVLINK_TOTAL_RX_PER_SEC", 60, MIB, "core"),
    ("gpm_nvlink_tx_bytes_per_s", "NVLINK_TOTAL_TX_PER_SEC", 61, MIB, "core"),
    ("gpm_c2c_tx_bytes_per_s", "C2C_TOTAL_TX_PER_SEC", 100, MIB, "core"),  # Grace Hopper's chip-to-chip link
    ("gpm_c2c_rx_bytes_per_s", "C2C_TOTAL_RX_PER_SEC", 101, MIB, "core"),
    ("gpm_c2c_data_tx_bytes_per_s", "C2C_DATA_TX_PER_SEC", 102, MIB, "all"),
    ("gpm_c2c_data_rx_bytes_per_s", "C2C_DATA_RX_PER_SEC", 103, MIB, "all"),
    *((f"gpm_nvdec_{i}_util_pct", f"NVDEC_{i}_UTIL", 30 + i, 1.0, "all") for i in range(8)),
    *((f"gpm_nvjpg_{i}_util_pct", f"NVJPG_{i}_UTIL", 40 + i, 1.0, "all") for i in range(8)),
    *((f"gpm_nvofa_{i}_util_pct", f"NVOFA_{i}_UTIL", 50 + i, 1.0, "all") for i in range(2)),
    ("gpm_hostmem_cache_hit_pct", "HOSTMEM_CACHE_HIT", 160, 1.0, "all"),
    ("gpm_hostmem_cache_miss_pct", "HOSTMEM_CACHE_MISS", 161, 1.0, "all"),
    ("gpm_peermem_cache_hit_pct", "PEERMEM_CACHE_HIT", 162, 1.0, "all"),
    ("gpm_peermem_cache_miss_pct", "PEERMEM_CACHE_MISS", 163, 1.0, "all"),
    ("gpm_dram_cache_hit_pct", "DRAM_CACHE_HIT", 164, 1.0, "all"),
    ("gpm_dram_cache_miss_pct", "DRAM_CACHE_MISS", 165, 1.0, "all"),
    *((f"gpm_nvenc_{i}_util_pct", f"NVENC_{i}_UTIL", 166 + i, 1.0, "all") for i in range(4)),
    *((f"gpm_gr{i}_ctxsw_active_pct", f"GR{i}_CTXSW_ACTIVE_PCT", 174 + 5 * i, 1.0, "all") for i in range(8)),
)


def gpm_metrics(which: bool | str) -> list[tuple[str, int, float]]:
    """The (name, id, scale) rows for ``which``: True or ``"core"``, ``"all"``, or False (none)."""
    if which not in (True, False, "core", "all"):
        raise ValueError(f"gpm must be True, False, 'core' or 'all', not {which!r}")
    groups = {"all": ("core", "all"), False: ()}.get(which, ("core",))
    return [(n, i, s) for n, _, i, s, g in GPM_METRICS if g in groups]


class Gpm:
    """GPM reads of one GPU: :meth:`start`, then :meth:`probe` (drops what NVML refuses), then :meth:`read`.

    Raises
    ------
    Unsupported
        When ``nvmlGpmQueryDeviceSupport`` says the GPU has no GPM (before Hopper).
    """

    def __init__(self, nvml: Any, handle: Any, metrics: list[tuple[str, int, float]], min_interval_s: float) -> None:
        if not nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
            raise Unsupported("no GPM on this GPU (Hopper or later)")
        self.nvml, self.rows, self.min_interval_s = nvml, list(metrics), min_interval_s
        self.samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        self.request = nvml.c_nvmlGpmMetricsGet_t()
        self._ask()
        self.t = 0.0
        self.first_due: float | None = None  # a due time set from outside (:meth:`due_in`), until the next computation
        self.values: tuple[float, ...] = (NAN,) * len(self.rows)
        self.reasons: dict[str, str] = {}  # the last computation's failed metrics

    def _ask(self) -> None:
        """Write the metric ids and their count into the request (inputs NVML leaves as they are).

        With pynvml's ctypes request, the metrics are then unpacked from it with one ``struct`` call and the two
        calls go to the library directly (:mod:`.nvml_direct`); a fake NVML's request is read attribute by
        attribute.
        """
        self.scales = [scale for _, _, scale in self.rows]
        self._direct = None
        self._fill(self.request)
        calls = direct_calls(self.nvml)
        if calls is not None and isinstance(self.request, ctypes.Structure):
            # two requests, one per order of the snapshots (they swap roles at each read): nothing to set per read
            unpack = struct.Struct("=" + METRIC * len(self.rows)).unpack_from
            phases = []
            for older, newer in (self.samples, self.samples[::-1]):
                req = self.nvml.c_nvmlGpmMetricsGet_t()
                self._fill(req)
                req.sample1, req.sample2 = older, newer
                phases.append((newer, ctypes.byref(req), memoryview(req.metrics).cast("B"), req))
            self._direct = (self.direct_snapshot(calls), calls.fn("nvmlGpmMetricsGet"), calls.check, unpack, phases)
            self._phase = 0

    def _fill(self, req: Any) -> None:
        req.version, req.numMetrics = self.nvml.NVML_GPM_METRICS_GET_VERSION, len(self.rows)
        for k, (_, metric_id, _) in enumerate(self.rows):
            req.metrics[k].metricId = metric_id

    @property
    def metrics(self) -> tuple[str, ...]:
        """Names of the metrics read."""
        return tuple(n for n, _, _ in self.rows)

    def snapshot(self, handle: Any, sample: Any) -> None:
        """Copy the GPU's counters into ``sample`` (``nvmlGpmSampleGet``)."""
        self.nvml.nvmlGpmSampleGet(handle, sample)

    def direct_snapshot(self, calls: Any) -> Any:
        """The C call of :meth:`snapshot`, as ``get(handle, sample)`` (``calls``: :func:`.nvml_direct.direct_calls`)."""
        return calls.fn("nvmlGpmSampleGet")

    def start(self, handle: Any) -> None:
        """Take the first snapshot."""
        self.snapshot(handle, self.samples[0])
        self.t = time.monotonic()

    def probe(self, handle: Any) -> dict[str, str]:
        """Compute once; drop and return the metrics NVML refused.

        It waits after :meth:`start` for one and a half driver refreshes (``min_interval_s`` if shorter).
        """
        time.sleep(max(0.0, self.t + min(self.min_interval_s, 1.5 * REFRESH_S) - time.monotonic()))
        try:
            self.read(handle, force=True)
        except PartialRead as p:
            keep = [r for r in self.rows if r[0] not in p.reasons]
            self.values = tuple(v for r, v in zip(self.rows, p.values) if r[0] not in p.reasons)
            self.rows, self.reasons = keep, {}
            self._ask()
            return p.reasons
        return {}

    def due_at(self) -> float:
        """The ``time.monotonic()`` from which :meth:`read` computes again (before it, it repeats the last values)."""
        if self.first_due is not None:
            return self.first_due
        return self.t + self.min_interval_s - REFRESH_S / 4

    def due_in(self, seconds: float) -> None:
        """Make the next computation due ``seconds`` from now (readers' computations spread over an interval)."""
        self.first_due = time.monotonic() + seconds

    def read(self, handle: Any, force: bool = False) -> tuple[float, ...]:
        """The metrics since the last snapshot.

        The last values while that snapshot is under ``min_interval_s`` old, unless ``force``. Repeated values
        that held failed metrics raise :class:`PartialRead` again, as their computation did: a metric is seen to
        work again only when it is computed again.
        """
        now = time.monotonic()
        if now < self.due_at() and not force:
            return self._held()
        nvml, req = self.nvml, self.request
        if self._direct is not None:
            get, compute, check, unpack, phases = self._direct
            newer, ref, raw, _ = phases[self._phase]
            check(get(handle, newer))
            check(compute(ref))
            got = unpack(raw)  # (nvmlReturn, value) of each metric
            rets, values = got[0::2], got[1::2]
        else:
            self.snapshot(handle, self.samples[1])
            req.sample1, req.sample2 = self.samples
            nvml.nvmlGpmMetricsGet(req)
            got = req.metrics[: len(self.rows)]  # one call: the metrics' structs, not one lookup per metric
            rets, values = [m.nvmlReturn for m in got], [m.value for m in got]
        if not any(values) and not any(rets) and now - self.t < 2 * REFRESH_S:
            return self._held()  # no refresh between the snapshots: keep the older one, repeat the last values
        if self._direct is not None:
            self._phase ^= 1
        self.samples.reverse()
        self.t, self.first_due = now, None
        if not any(rets):  # NVML_SUCCESS is 0
            self.values, self.reasons = tuple([v * scale for v, scale in zip(values, self.scales)]), {}
            return self.values
        self.values = tuple([NAN if r else v * scale for r, v, scale in zip(rets, values, self.scales)])
        self.reasons = {name: _error_text(nvml, r) for (name, _, _), r in zip(self.rows, rets) if r}
        raise PartialRead(self.values, self.reasons)

    def _held(self) -> tuple[float, ...]:
        """The last values, and their failures again."""
        if self.reasons:
            raise PartialRead(self.values, self.reasons)
        return self.values

    def close(self) -> None:
        """Free the snapshot buffers."""
        for s in self.samples:
            try:
                self.nvml.nvmlGpmSampleFree(s)
            except Exception:  # freeing is best effort (NVML may be shut down or the GPU gone)
                pass
        self.samples = []


def _error_text(nvml: Any, code: int) -> str:
    try:
        return f"{nvml.NVMLError(code)} (NVML error {code})"
    except Exception:  # an unknown code asks the library for its text, which may fail
        return f"NVML error {code}"
