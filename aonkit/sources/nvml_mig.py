"""MIG (Multi-Instance GPU) instances of a GPU for :class:`~aonkit.sources.nvml.NvmlSampler`, and the GPUs' layout.

With MIG enabled (A100, H100 and later), a GPU is split into GPU instances (``gi``: their own memory, L2 and SMs),
each holding one or more compute instances (``ci``); a CUDA process sees one MIG device (a ``(gi, ci)`` pair).
NVML then refuses the whole GPU's utilization (``nvmlDeviceGetUtilizationRates``: not supported), so
``gpu_util_pct`` goes to the sampler's ``unsupported`` list; what each instance does comes from:

=========================================================  ====================================================
``memory_used_bytes.gi<G>``, ``memory_total_bytes.gi<G>``  ``nvmlDeviceGetMemoryInfo`` of the instance's MIG device
``gpm_<metric>.gi<G>`` (Hopper and later)                   ``nvmlGpmMigSampleGet(gpu, G, ...)``, the GPM metrics
                                                            of :mod:`.gpm` over that GPU instance
=========================================================  ====================================================

on the parent GPU's ``device`` index, beside the whole GPU's power, clocks, temperature, memory and counters. The
compute instances of one GPU instance share its memory and its GPM counters: one set of channels per ``gi``.
``process_memory_bytes.<pid>`` (``pids=``) is summed over the MIG devices when NVML refuses the whole GPU's list
(it gives it in MIG mode to privileged callers only).

:func:`gpu_layout` is what the daemon compares to notice a GPU added or removed, or MIG reconfigured (an instance
made or destroyed changes which MIG devices exist, and a destroyed one's handle no longer reads).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .gpm import Gpm
from .nvml_metrics import Reader, device_readers, processes_reader

MIG_ENABLE = 1
"""``NVML_DEVICE_MIG_ENABLE`` (nvml.h)."""


@dataclass(frozen=True)
class MigDevice:
    """One MIG device of a GPU: its GPU and compute instance ids, UUID and NVML handle."""

    gi: int
    ci: int
    uuid: str
    handle: Any


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _not_found(nvml: Any, exc: BaseException) -> bool:
    return getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_FOUND", 6)


def mig_devices(nvml: Any, handle: Any) -> list[MigDevice] | None:
    """The MIG devices of the GPU ``handle`` (in NVML's order), or None when MIG is not enabled on it.

    None also for a GPU without MIG, or an NVML that cannot tell (not supported, function not found). An error
    while listing the devices of a GPU in MIG mode raises (the sampler lists it as unsupported).
    """
    try:
        current = nvml.nvmlDeviceGetMigMode(handle)[0]
    except (AttributeError, nvml.NVMLError):
        return None
    if current != MIG_ENABLE:
        return None
    out = []
    for i in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except nvml.NVMLError as exc:
            if _not_found(nvml, exc):  # an empty slot
                continue
            raise
        out.append(MigDevice(int(nvml.nvmlDeviceGetGpuInstanceId(mig)), int(nvml.nvmlDeviceGetComputeInstanceId(mig)),
                             _text(nvml.nvmlDeviceGetUUID(mig)), mig))  # fmt: skip
    return out


def by_instance(devices: list[MigDevice]) -> dict[int, MigDevice]:
    """The first MIG device of each GPU instance, by ``gi`` (ascending): they share its memory and counters."""
    first: dict[int, MigDevice] = {}
    for d in devices:
        first.setdefault(d.gi, d)
    return dict(sorted(first.items()))


MEMORY = ("memory_used_bytes", "memory_total_bytes")
"""The GPU's memory readers' metrics (:func:`~aonkit.sources.nvml_metrics.device_readers`), read per instance."""


def on_device(reader: Reader, handle: Any, names: tuple[str, ...]) -> Reader:
    """``reader`` reading ``handle`` (a MIG device) whatever handle the sampler passes, its metrics ``names``.

    A direct reader's batched call (:mod:`.nvml_batch`) reads that device too.
    """

    def read(_: Any) -> Any:
        return reader.read(handle)

    spec = getattr(reader.read, "batch", None)
    if spec is not None:
        read.batch = replace(spec, handle=handle)  # type: ignore[attr-defined]
    return Reader(names, read, reader.calls, reader.slow)


def mig_readers(nvml: Any, dev: MigDevice) -> list[list[Reader]]:
    """The readers of one GPU instance, as :func:`~aonkit.sources.nvml_metrics.device_readers` lists them.

    The GPU's own memory readers (the direct call first, pynvml's next), bound to the instance's MIG device.
    """
    group = next(g for g in device_readers(nvml) if g[0].metrics == MEMORY)
    return [[on_device(r, dev.handle, tuple(f"{m}.gi{dev.gi}" for m in MEMORY)) for r in group]]


def mig_processes(nvml: Any, devices: list[MigDevice], pids: tuple[int, ...]) -> Reader:
    """``process_memory_bytes.<pid>`` of a GPU in MIG mode, summed over its MIG devices' running processes.

    The alternative to the whole GPU's list, which NVML gives in MIG mode only to a privileged caller (others get
    "insufficient permissions"); each MIG device answers for its own.
    """
    return processes_reader(nvml, pids, [d.handle for d in devices])


class MigGpm(Gpm):
    """GPM metrics of one GPU instance: :class:`~aonkit.sources.gpm.Gpm` with ``nvmlGpmMigSampleGet`` snapshots.

    Its metrics are named ``<gpm metric>.gi<G>``; it is read with the parent GPU's handle.
    """

    def __init__(self, nvml: Any, handle: Any, gi: int, metrics: list[tuple[str, int, float]],
                 min_interval_s: float) -> None:  # fmt: skip
        self.gi = int(gi)
        super().__init__(nvml, handle, [(f"{n}.gi{self.gi}", i, s) for n, i, s in metrics], min_interval_s)

    def snapshot(self, handle: Any, sample: Any) -> None:
        """Copy this GPU instance's counters into ``sample``."""
        self.nvml.nvmlGpmMigSampleGet(handle, self.gi, sample)

    def direct_snapshot(self, calls: Any) -> Any:
        """The C call of :meth:`snapshot`, as ``get(handle, sample)``."""
        fn, gi = calls.fn("nvmlGpmMigSampleGet"), self.gi
        return lambda handle, sample: fn(handle, gi, sample)


def gpu_layout(nvml: Any) -> tuple | None:
    """What identifies the GPUs NVML sees now: per GPU its UUID and MIG devices ``(gi, ci, uuid)`` (None: no MIG).

    None when NVML cannot answer (then nothing is taken to have changed). About 5 NVML calls per GPU, and 4 per
    MIG device.
    """
    try:
        out = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            migs = mig_devices(nvml, h)
            out.append((_text(nvml.nvmlDeviceGetUUID(h)),
                        None if migs is None else tuple((d.gi, d.ci, d.uuid) for d in migs)))  # fmt: skip
        return tuple(out)
    except Exception:  # noqa: BLE001 - a look that fails is no news (a lost GPU shows in the samples)
        return None
