"""NVML readers: one NVML query on one GPU, giving one or more metrics, for :class:`~aonkit.sources.nvml.NvmlSampler`.

Metrics (``device`` is the GPU index; a name carries its unit):

=============================================  ===============================================================
``gpu_util_pct``, ``memory_util_pct``          ``nvmlDeviceGetUtilizationRates`` (kernel time, memory R/W time)
``memory_used_bytes``, ``memory_total_bytes``  ``nvmlDeviceGetMemoryInfo``
``power_w``                                    ``nvmlDeviceGetPowerUsage`` (mW / 1000): on Ampere and later but
                                               GA100, NVML's average over the last second
``power_instant_w``                            the ``NVML_FI_DEV_POWER_INSTANT`` field (the GPU's scope, mW / 1000)
``energy_j``                                   ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since driver load / 1000)
``sm_clock_mhz``, ``memory_clock_mhz``         ``nvmlDeviceGetClockInfo``
``temperature_c``                              ``nvmlDeviceGetTemperatureV`` (else ``nvmlDeviceGetTemperature``)
``clock_event_reasons_mask``                   ``nvmlDeviceGetCurrentClocksEventReasons`` (else ``...ThrottleReasons``):
                                               the ``nvmlClocksEventReason*`` bits, as a number
``pcie_tx_bytes_per_s``, ``pcie_rx_bytes_per_s``  rate of the ``NVML_FI_DEV_PCIE_COUNT_{TX,RX}_BYTES`` counters, else
                                               ``nvmlDeviceGetPcieThroughput`` (KiB/s over NVML's 20 ms window)
``nvlink_tx_bytes_per_s``, ``nvlink_rx_bytes_per_s``  rate of ``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{TX,RX}`` (KiB
                                               counters) summed over the active links
``process_memory_bytes.<pid>``                 ``usedGpuMemory`` of that pid in ``nvmlDeviceGetComputeRunningProcesses``
                                               (0 when the pid has no context on the GPU; NaN when NVML hides it)
=============================================  ===============================================================

Each entry of :func:`device_readers` is a list of alternatives, best first; the sampler keeps the first that works
(GPM metrics: :mod:`aonkit.sources.gpm`). ``temperature_c``, ``energy_j``, ``memory_clock_mhz`` and
``process_memory_bytes.*`` are *slow*: the sampler reads them every ``slow_interval_s`` (1 s by default) and
repeats the last value at the samples between. So are, on a GPU where another metric measures the same at every
sample (:data:`ALSO`), ``power_w`` (where ``power_instant_w`` is read: ``power_w`` is a 1 s average on most GPUs
today, which at 10 Hz would trail the timeline by half a second) and the PCIe and NVLink counters (where GPM gives
``gpm_pcie_*``, ``gpm_nvlink_*``; the counters' rates are then 1 s averages).

With pynvml itself (a GPU machine, or the tests' C library), the fast metrics' readers call the C functions
directly (:mod:`aonkit.sources.nvml_direct`), each with pynvml's own reader as its fallback.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import nvml_direct
from .nvml_direct import Calls

NAN = math.nan
INSTANT_POWER = (186, 0)
"""(``NVML_FI_DEV_POWER_INSTANT``, ``NVML_POWER_SCOPE_GPU``): nvml.h's numbers, for a pynvml without the constant."""


class Unsupported(Exception):
    """A reader cannot work on this GPU; the message says why."""


class PartialRead(Exception):
    """Some metrics of a reader failed this time: ``values`` (NaN where failed) and ``reasons`` by metric."""

    def __init__(self, values: tuple[float, ...], reasons: dict[str, str]) -> None:
        super().__init__("; ".join(f"{m}: {r}" for m, r in reasons.items()))
        self.values, self.reasons = values, reasons


@dataclass
class Reader:
    """One NVML query: ``read(handle)`` returns one float per name in ``metrics``; ``calls`` NVML calls per read.

    ``slow``: the metric changes over seconds (temperature, a cumulative counter, the memory clock, which
    processes hold memory), so the sampler may read it less often (``slow_interval_s``) and repeat its last value.
    """

    metrics: tuple[str, ...]
    read: Callable[[Any], Sequence[float]]
    calls: int = 1
    slow: bool = False


class Rate:
    """Per-second rates of cumulative counters: ``counters(handle) -> (ts_us, values)``, times ``scale``.

    The first read gives NaN (no earlier value); a counter that went back (reset, wrap) gives NaN; a read whose
    timestamp did not move (NVML refreshes some counters less often than it is polled) repeats the last rates.
    """

    def __init__(self, counters: Callable[[Any], tuple[float, list[float]]], n: int, scale: float) -> None:
        self.counters, self.scale = counters, scale
        self.last: tuple[float, list[float]] | None = None
        self.rates: tuple[float, ...] = (NAN,) * n

    def __call__(self, handle: Any) -> tuple[float, ...]:
        """The rates since the last read."""
        ts, values = self.counters(handle)
        last, self.last = self.last, (ts, values)
        if last is not None and ts > last[0]:
            dt = (ts - last[0]) / 1e6
            self.rates = tuple((v - u) * self.scale / dt if v >= u else NAN for u, v in zip(last[1], values))
        return self.rates


def field_counters(nvml: Any, ids: Callable[[Any], list[tuple[int, int]]]) -> Callable[[Any], tuple]:
    """``handle -> (ts_us, values)`` of the field values ``ids(handle)`` (``(fieldId, scopeId)`` pairs)."""

    def read(handle: Any) -> tuple[float, list[float]]:
        ts, out = 0, []
        for v in nvml.nvmlDeviceGetFieldValues(handle, ids(handle)):
            if v.nvmlReturn != nvml.NVML_SUCCESS:
                raise nvml.NVMLError(v.nvmlReturn)
            out.append(nvml_direct.typed_value(v.value, v.valueType))
            ts = max(ts, v.timestamp)
        return (ts or time.time_ns() / 1e3), out

    return read


def _nvlink(nvml: Any, direct: Calls | None = None) -> Reader:
    """NVLink TX/RX summed over the links found active at the first read (through ``direct`` when given)."""
    links: list[int] = []
    counters: list[Callable[[Any], tuple]] = []

    def ids(handle: Any) -> list[tuple[int, int]]:
        if not links:
            for link in range(nvml.NVML_NVLINK_MAX_LINKS):
                try:
                    if nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED:
                        links.append(link)
                except nvml.NVMLError:
                    break
            if not links:
                raise Unsupported("no active NVLink")
        return [(f, link) for f in (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                                    nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX) for link in links]  # fmt: skip

    def summed(handle: Any) -> tuple[float, list[float]]:
        if not counters:
            counters.append(field_counters(nvml, ids) if direct is None
                            else nvml_direct.field_counters(direct, ids(handle)))  # fmt: skip
        ts, v = counters[0](handle)
        return ts, [float(sum(v[: len(links)])), float(sum(v[len(links) :]))]

    return Reader(("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s"), Rate(summed, 2, 1024.0))


def _first(counters: Callable[[Any], tuple[float, list[float]]], per: float) -> Callable[[Any], tuple[float]]:
    """``handle -> (value / per,)`` of the first field value ``counters`` reads."""

    def read(handle: Any) -> tuple[float]:
        return (counters(handle)[1][0] / per,)

    return read


def _direct_readers(c: Calls, n: Any, pcie: tuple) -> dict[tuple[str, ...], Reader]:
    """The readers of the fast metrics that call the library directly, by their metrics (see :mod:`.nvml_direct`)."""
    made: dict[tuple[str, ...], Reader] = {}
    wanted = [
        (("gpu_util_pct", "memory_util_pct"),
         lambda: nvml_direct.pair(c, "nvmlDeviceGetUtilizationRates", n.c_nvmlUtilization_t, ("gpu", "memory"))),
        (("memory_used_bytes", "memory_total_bytes"),
         lambda: nvml_direct.pair(c, "nvmlDeviceGetMemoryInfo", n.c_nvmlMemory_t, ("used", "total"))),
        (("power_w",), lambda: nvml_direct.scalar(c, "nvmlDeviceGetPowerUsage", ctypes.c_uint, per=1e3)),
        (("power_instant_w",), lambda: nvml_direct.field_value(c, *INSTANT_POWER, per=1e3)),
        (("sm_clock_mhz",), lambda: nvml_direct.scalar(c, "nvmlDeviceGetClockInfo", ctypes.c_uint, n.NVML_CLOCK_SM)),
        (("clock_event_reasons_mask",),
         lambda: nvml_direct.scalar(c, "nvmlDeviceGetCurrentClocksEventReasons", ctypes.c_ulonglong)),
        (("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"),
         lambda: Rate(nvml_direct.field_counters(c, list(pcie)), 2, 1.0)),
    ]  # fmt: skip
    for metrics, make in wanted:
        try:
            made[metrics] = Reader(metrics, make())
        except c.error:  # the library lacks the function: pynvml's reader says so at the probe
            continue
    made[("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")] = _nvlink(n, c)
    return made


def processes_reader(nvml: Any, pids: Sequence[int], handles: Sequence[Any] = ()) -> Reader:
    """``process_memory_bytes.<pid>``: each pid's ``usedGpuMemory`` summed over the GPU's running processes.

    A process has one entry per MIG device it uses (in MIG mode), hence the sum; NaN where NVML hides the memory.
    ``handles``: read these devices' lists (a GPU's MIG devices) instead of the handle the sampler passes.
    """

    def read(handle: Any) -> tuple[float, ...]:
        used = dict.fromkeys(pids, 0.0)
        for h in handles or (handle,):
            for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid in used:
                    used[p.pid] += NAN if p.usedGpuMemory is None else float(p.usedGpuMemory)
        return tuple(used.values())

    return Reader(tuple(f"process_memory_bytes.{pid}" for pid in pids), read, calls=max(1, len(handles)), slow=True)


def device_readers(nvml: Any, pids: Sequence[int] = ()) -> list[list[Reader]]:
    """Fresh readers for one GPU (rates keep state): per metric group, the alternatives, best first.

    With pynvml itself (not a fake), each fast metric's first alternative calls the library directly
    (:mod:`aonkit.sources.nvml_direct`); pynvml's own function is the next one.
    """
    n = nvml
    pcie = (n.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0), (n.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0)
    pcie_names = ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
    groups = [
        [Reader(("gpu_util_pct", "memory_util_pct"),
                lambda h: (lambda u: (float(u.gpu), float(u.memory)))(n.nvmlDeviceGetUtilizationRates(h)))],
        [Reader(("memory_used_bytes", "memory_total_bytes"),
                lambda h: (lambda m: (float(m.used), float(m.total)))(n.nvmlDeviceGetMemoryInfo(h)))],
        [Reader(("power_w",), lambda h: (n.nvmlDeviceGetPowerUsage(h) / 1e3,))],
        [Reader(("power_instant_w",), _first(field_counters(n, lambda h: [INSTANT_POWER]), 1e3))],
        [Reader(("energy_j",), lambda h: (n.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3,), slow=True)],
        [Reader(("sm_clock_mhz",), lambda h: (float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),))],
        [Reader(("memory_clock_mhz",), lambda h: (float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),), slow=True)],
        [Reader(("temperature_c",), lambda h: (float(n.nvmlDeviceGetTemperatureV(h, n.NVML_TEMPERATURE_GPU)),),
                slow=True),
         Reader(("temperature_c",), lambda h: (float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),),
                slow=True)],
        [Reader(("clock_event_reasons_mask",), lambda h: (float(n.nvmlDeviceGetCurrentClocksEventReasons(h)),)),
         Reader(("clock_event_reasons_mask",), lambda h: (float(n.nvmlDeviceGetCurrentClocksThrottleReasons(h)),))],
        [Reader(pcie_names, Rate(field_counters(n, lambda h: list(pcie)), 2, 1.0)),
         Reader(pcie_names, lambda h: tuple(n.nvmlDeviceGetPcieThroughput(h, c) * 1024.0
                                            for c in (n.NVML_PCIE_UTIL_TX_BYTES, n.NVML_PCIE_UTIL_RX_BYTES)), 2)],
        [_nvlink(n)],
    ]  # fmt: skip
    if (direct := nvml_direct.direct_calls(n)) is not None:
        fast = _direct_readers(direct, n, pcie)
        for group in groups:
            if group[0].metrics in fast:
                group.insert(0, fast[group[0].metrics])
    if pids:
        groups.append([processes_reader(n, pids)])
    return groups


ALSO = {"pcie_tx_bytes_per_s": "gpm_pcie_tx_bytes_per_s", "nvlink_tx_bytes_per_s": "gpm_nvlink_tx_bytes_per_s",
        "power_w": "power_instant_w"}
"""A reader's first metric, and the metric that measures the same at every sample where it is read."""


def slow_where_also_measured(readers: Sequence[Any]) -> None:
    """Make slow each reader of one GPU whose :data:`ALSO` metric another of its ``readers`` reads."""
    there = {m for r in readers for m in r.metrics}
    for reader in readers:
        if isinstance(reader, Reader) and ALSO.get(reader.metrics[0]) in there:
            reader.slow = True


def describe(exc: BaseException) -> str:
    """One line for an NVML (or other) error: the NVML text and code, else the type and message."""
    value = getattr(exc, "value", None)
    if isinstance(value, int):
        return f"{exc} (NVML error {value})"
    return str(exc) if isinstance(exc, Unsupported) else f"{type(exc).__name__}: {exc}"
