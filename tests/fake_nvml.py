"""A fake NVML: exactly the pynvml subset ``aonkit.sources.nvml`` calls, over GPUs a test configures.

Errors are pynvml's own: ``pynvml.NVMLError(code)`` makes the ``NVMLError_*`` subclass the real binding raises,
so the sampler's error handling runs as it does on a GPU. A handle is the :class:`FakeGpu` itself. Values are
simple functions of the GPU index ``i`` and its tick ``k`` (utilization reads), listed on each method, so a test
can check that a value landed on the right channel.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml

GIB = 1 << 30
MIB = 1 << 20
POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT


def gpm_value(index: int, metric_id: int, k1: int, k2: int, gi: int = 0) -> float:
    """What the fake GPM gives between snapshots ``k1`` and ``k2`` of GPU ``index`` (or its GPU instance ``gi``):
    the mean rate over them."""
    return sum((metric_id + 10 * index + 3 * gi + t) % 100 for t in range(k1 + 1, k2 + 1)) / (k2 - k1)


@dataclass(eq=False)
class FakeMig:
    """A MIG device handle: GPU instance ``gi``, compute instance ``ci`` of ``parent``."""

    parent: FakeGpu
    gi: int
    ci: int


@dataclass
class FakeGpu:
    """One fake GPU and what it refuses.

    ``unsupported``: functions that raise NotSupported; ``failing``: function -> exception raised now (set and
    clear it between ticks); ``power_instant``: the ``NVML_FI_DEV_POWER_INSTANT`` field (else NotSupported in its
    field value); ``slow``: function -> seconds it sleeps; ``lost_after``: utilization reads after
    which every call raises GPU_IS_LOST; ``gpm_unsupported``: GPM metric ids NVML refuses; ``gpm_frozen``: GPM
    snapshots repeat the last one, as between two driver refreshes (set and clear it between ticks); ``mig``: the
    MIG devices ``(gi, ci)`` with MIG enabled (None: disabled; the whole GPU's utilization is then refused, as NVML
    does, and a MIG device no longer listed reads as a destroyed one: invalid argument); ``mig_capable``: False
    makes ``nvmlDeviceGetMigMode`` not supported (a GPU before Ampere).
    """

    name: str = "Fake H100"
    hopper: bool = True
    nvlinks: int = 4
    pcie_counters: bool = True
    power_instant: bool = True
    processes: dict[int, int | None] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)
    failing: dict[str, Exception] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)
    gpm_unsupported: set[int] = field(default_factory=set)
    lost_after: int | None = None
    index: int = 0
    ticks: int = 0
    gpm_ticks: int = 0
    gpm_frozen: bool = False
    field_reads: int = 0
    lost: bool = False
    calls: Counter = field(default_factory=Counter)
    mig: list[tuple[int, int]] | None = None
    mig_capable: bool = True
    mig_handles: dict[tuple[int, int], FakeMig] = field(default_factory=dict)
    mig_gpm_ticks: Counter = field(default_factory=Counter)
    mig_processes: dict[tuple[int, int], dict[int, int | None]] = field(default_factory=dict)
    mig_root: bool = False


class FakeNvml:
    """A module-like NVML over ``gpus``; ``init_error`` (an NVML_ERROR_* code) makes ``nvmlInit`` fail."""

    NVMLError = pynvml.NVMLError
    NVML_SUCCESS = pynvml.NVML_SUCCESS
    NVML_CLOCK_SM, NVML_CLOCK_MEM = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = pynvml.NVML_PCIE_UTIL_TX_BYTES, pynvml.NVML_PCIE_UTIL_RX_BYTES
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES = pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES
    NVML_FI_DEV_PCIE_COUNT_RX_BYTES = pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
    NVML_NVLINK_MAX_LINKS = pynvml.NVML_NVLINK_MAX_LINKS
    NVML_FEATURE_ENABLED = pynvml.NVML_FEATURE_ENABLED
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_GPU_NOT_FOUND = pynvml.NVML_ERROR_GPU_NOT_FOUND
    NVML_ERROR_RESET_REQUIRED = pynvml.NVML_ERROR_RESET_REQUIRED
    NVML_ERROR_LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    NVML_ERROR_NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND
    MAX_MIG = 7  # nvmlDeviceGetMaxMigDeviceCount of an H100

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        self.gpus = gpus
        for i, g in enumerate(gpus):
            g.index = i
        self.init_error = init_error
        self.inits = 0  # nvmlInit minus nvmlShutdown calls
        self.gpm_freed = 0

    # -- library and devices

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self._enter(self.gpus[index], "nvmlDeviceGetHandleByIndex")

    def nvmlDeviceGetName(self, g: FakeGpu) -> str:
        return self._enter(g, "nvmlDeviceGetName").name

    def _enter(self, g: FakeGpu, fn: str) -> FakeGpu:
        g.calls[fn] += 1
        if fn == "nvmlDeviceGetUtilizationRates" and not g.lost:
            g.ticks += 1
            g.lost = g.lost_after is not None and g.ticks > g.lost_after
        if g.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in g.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if fn in g.failing:
            raise g.failing[fn]
        if fn in g.slow:
            time.sleep(g.slow[fn])
        return g

    # -- per-GPU queries (i: GPU index, k: ticks)

    def nvmlDeviceGetUtilizationRates(self, g: FakeGpu) -> SimpleNamespace:
        """gpu = (10 i + k) % 101, memory = (5 i + k) % 101 (not supported in MIG mode)."""
        g = self._enter(g, "nvmlDeviceGetUtilizationRates")
        if g.mig is not None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=(10 * g.index + g.ticks) % 101, memory=(5 * g.index + g.ticks) % 101)

    def nvmlDeviceGetMemoryInfo(self, g: FakeGpu | FakeMig) -> SimpleNamespace:
        """used = (i + 1) GiB + k MiB of 80 GiB; a MIG device's: gi GiB + its reads MiB of 10 gi GiB."""
        if isinstance(g, FakeMig):
            m = self._mig(g, "nvmlDeviceGetMemoryInfo")
            reads = m.parent.calls[f"memory of gi {m.gi}"] = m.parent.calls[f"memory of gi {m.gi}"] + 1
            return SimpleNamespace(used=m.gi * GIB + reads * MIB, total=10 * m.gi * GIB)
        g = self._enter(g, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=(g.index + 1) * GIB + g.ticks * MIB, total=80 * GIB)

    # -- MIG

    def _mig(self, m: FakeMig, fn: str) -> FakeMig:
        g = self._enter(m.parent, fn)
        if g.mig is None or (m.gi, m.ci) not in g.mig:  # destroyed since the handle was taken
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return m

    def nvmlDeviceGetUUID(self, g: FakeGpu | FakeMig) -> str:
        if isinstance(g, FakeMig):
            return f"MIG-fake-{self._mig(g, 'nvmlDeviceGetUUID').parent.index}-{g.gi}-{g.ci}"
        return f"GPU-fake-{self._enter(g, 'nvmlDeviceGetUUID').index}"

    def nvmlDeviceGetMigMode(self, g: FakeGpu) -> list[int]:
        g = self._enter(g, "nvmlDeviceGetMigMode")
        if not g.mig_capable:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [int(g.mig is not None)] * 2

    def nvmlDeviceGetMaxMigDeviceCount(self, g: FakeGpu) -> int:
        return self.MAX_MIG if self._enter(g, "nvmlDeviceGetMaxMigDeviceCount").mig_capable else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, g: FakeGpu, index: int) -> FakeMig:
        g = self._enter(g, "nvmlDeviceGetMigDeviceHandleByIndex")
        if g.mig is None or index >= len(g.mig):
            code = pynvml.NVML_ERROR_INVALID_ARGUMENT if g.mig is None else pynvml.NVML_ERROR_NOT_FOUND
            raise pynvml.NVMLError(code)
        key = g.mig[index]
        return g.mig_handles.setdefault(key, FakeMig(g, *key))

    def nvmlDeviceGetGpuInstanceId(self, m: FakeMig) -> int:
        return self._mig(m, "nvmlDeviceGetGpuInstanceId").gi

    def nvmlDeviceGetComputeInstanceId(self, m: FakeMig) -> int:
        return self._mig(m, "nvmlDeviceGetComputeInstanceId").ci

    def nvmlDeviceGetPowerUsage(self, g: FakeGpu) -> int:
        """100 W + i W, in mW."""
        return 100_000 + 1000 * self._enter(g, "nvmlDeviceGetPowerUsage").index

    def nvmlDeviceGetTotalEnergyConsumption(self, g: FakeGpu) -> int:
        """(i + 1) kJ + 10 J per tick, in mJ."""
        g = self._enter(g, "nvmlDeviceGetTotalEnergyConsumption")
        return (g.index + 1) * 1_000_000 + 10_000 * g.ticks

    def nvmlDeviceGetClockInfo(self, g: FakeGpu, clock: int) -> int:
        """SM 1980 - i MHz, memory 2619 MHz."""
        g = self._enter(g, "nvmlDeviceGetClockInfo")
        return 1980 - g.index if clock == pynvml.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperatureV(self, g: FakeGpu, sensor: int) -> int:
        """40 + i C."""
        return 40 + self._enter(g, "nvmlDeviceGetTemperatureV").index

    def nvmlDeviceGetTemperature(self, g: FakeGpu, sensor: int) -> int:
        """41 + i C (the older call: a different value, to tell which one was used)."""
        return 41 + self._enter(g, "nvmlDeviceGetTemperature").index

    def nvmlDeviceGetCurrentClocksEventReasons(self, g: FakeGpu) -> int:
        self._enter(g, "nvmlDeviceGetCurrentClocksEventReasons")
        return pynvml.nvmlClocksEventReasonSwPowerCap

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, g: FakeGpu) -> int:
        self._enter(g, "nvmlDeviceGetCurrentClocksThrottleReasons")
        return pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwSlowdown

    def nvmlDeviceGetPcieThroughput(self, g: FakeGpu, counter: int) -> int:
        """TX 2000, RX 1000 KB/s."""
        self._enter(g, "nvmlDeviceGetPcieThroughput")
        return 2000 if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else 1000

    def nvmlDeviceGetNvLinkState(self, g: FakeGpu, link: int) -> int:
        g = self._enter(g, "nvmlDeviceGetNvLinkState")
        if g.nvlinks == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= g.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetFieldValues(self, g: FakeGpu, ids: list[tuple[int, int]]) -> list[SimpleNamespace]:
        """Counters stepping with each read that asks for one, 0.1 s apart on the field clock; instant power.

        PCIe: TX 1 MB and RX 0.5 MB a step; NVLink: TX 100 and RX 50 KiB a step on each link. Instant power:
        (150 + i) W + k mW (an unsigned int, as NVML gives it).
        """
        g = self._enter(g, "nvmlDeviceGetFieldValues")
        per_step = {pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES: 1_000_000, pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES: 500_000,
                    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 100, pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 50}
        if any(field_id in per_step for field_id, _ in ids):
            g.field_reads += 1
        n, out = g.field_reads, []
        for field_id, scope in ids:
            if field_id == POWER_INSTANT:
                ok, kind, value = g.power_instant, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"
                number = (150 + g.index) * 1000 + g.ticks
            else:
                pcie = field_id in (pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES)
                ok = g.pcie_counters if pcie else scope < g.nvlinks
                kind, value = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"
                number = per_step[field_id] * n
            out.append(SimpleNamespace(
                fieldId=field_id, scopeId=scope, timestamp=1_700_000_000_000_000 + 100_000 * n, valueType=kind,
                nvmlReturn=pynvml.NVML_SUCCESS if ok else pynvml.NVML_ERROR_NOT_SUPPORTED,
                value=SimpleNamespace(**{value: number if ok else 0})))  # fmt: skip
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, g: FakeGpu | FakeMig) -> list[SimpleNamespace]:
        """``processes``; in MIG mode refused on the whole GPU (an unprivileged caller) unless ``mig_root``, and
        ``mig_processes[(gi, ci)]`` on each MIG device (the whole GPU's list, for root, is their union)."""
        if isinstance(g, FakeMig):
            m = self._mig(g, "nvmlDeviceGetComputeRunningProcesses")
            pairs = list(m.parent.mig_processes.get((m.gi, m.ci), {}).items())
        else:
            g = self._enter(g, "nvmlDeviceGetComputeRunningProcesses")
            if g.mig is not None and not g.mig_root:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
            pairs = (list(g.processes.items()) if g.mig is None
                     else [pb for held in g.mig_processes.values() for pb in held.items()])  # fmt: skip
        return [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in pairs]

    # -- GPM

    class c_nvmlGpmMetricsGet_t:  # noqa: N801 - pynvml's name
        def __init__(self) -> None:
            self.version = self.numMetrics = 0
            self.sample1 = self.sample2 = None
            self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0)
                            for _ in range(pynvml.NVML_GPM_METRIC_MAX)]  # fmt: skip

    def nvmlGpmQueryDeviceSupport(self, g: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(isSupportedDevice=int(self._enter(g, "nvmlGpmQueryDeviceSupport").hopper))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        return SimpleNamespace(gpu=None, k=0)

    def nvmlGpmSampleFree(self, sample: SimpleNamespace) -> None:
        self.gpm_freed += 1

    def nvmlGpmSampleGet(self, g: FakeGpu, sample: SimpleNamespace) -> SimpleNamespace:
        g = self._enter(g, "nvmlGpmSampleGet")
        g.gpm_ticks += not g.gpm_frozen  # a frozen GPU's snapshot is the last one again (no driver refresh)
        sample.gpu, sample.k, sample.gi = g, g.gpm_ticks, 0
        return sample

    def nvmlGpmMigSampleGet(self, g: FakeGpu, gi: int, sample: SimpleNamespace) -> SimpleNamespace:
        """A snapshot of GPU instance ``gi`` (its own count of snapshots); not found when it does not exist."""
        g = self._enter(g, "nvmlGpmMigSampleGet")
        if g.mig is None or gi not in {i for i, _ in g.mig}:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        g.mig_gpm_ticks[gi] += not g.gpm_frozen
        sample.gpu, sample.k, sample.gi = g, g.mig_gpm_ticks[gi], gi
        return sample

    def nvmlGpmMetricsGet(self, req: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
        """Each metric: :func:`gpm_value` between the two snapshots (of one GPU, the first not newer); 0 for two
        alike snapshots, with success, as the driver gives when no refresh came between them."""
        s1, s2 = req.sample1, req.sample2
        if (req.version != pynvml.NVML_GPM_METRICS_GET_VERSION or s1.gpu is not s2.gpu or s1.gi != s2.gi
                or s1.k > s2.k):  # fmt: skip
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        g = self._enter(s2.gpu, "nvmlGpmMetricsGet")
        for m in req.metrics[: req.numMetrics]:
            refused = m.metricId in g.gpm_unsupported
            m.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED if refused else pynvml.NVML_SUCCESS
            m.value = 0.0 if refused or s1.k == s2.k else gpm_value(g.index, m.metricId, s1.k, s2.k, s2.gi)
        return req
