"""GPU metrics through NVML, sampled on a thread into the host sampler's long form.

:class:`NvmlSampler` is a :class:`~aonkit.sources.samplers.Sampler`: ``read()`` gives ``ts_ns, device, metric,
value`` rows with ``device`` the GPU index, so :func:`~aonkit.sources.samplers.attach_samples`, ``LiveMonitor``
and the timeline's counter lanes take it as they take :class:`~aonkit.sources.samplers.HostSampler`. The metrics
are listed in :mod:`aonkit.sources.nvml_metrics` (per GPU) and :mod:`aonkit.sources.gpm` (Hopper and later).

Nothing here imports ``pynvml`` or starts NVML until a sampler is made. :func:`open_gpu_sampler` returns
``(None, reason)`` where NVML cannot run (no driver, no GPU), so a caller can sample the host only.

* Capabilities are probed once per GPU when the sampler is made: every reader is called; a metric NVML refuses
  (or that costs more than ``max_call_s`` a read) is left out and listed in :attr:`NvmlSampler.unsupported`.
* An error while sampling leaves that value NaN for the tick and is listed once in :attr:`NvmlSampler.gaps`
  (again only after the metric worked in between). A lost GPU (``GPU_IS_LOST``, ``GPU_NOT_FOUND``,
  ``RESET_REQUIRED``) gives NaN for all its metrics and one gap row with metric ``"*"``; it is tried again every
  ``lost_retry_s``. The sampling thread never raises.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from .gpm import Gpm, gpm_metrics
from .nvml_batch import FastTick
from .nvml_metrics import NAN, PartialRead, describe
from .nvml_mig import gpu_layout
from .nvml_probe import SLOW_READ_ALLOWANCE, Gpu, Probe  # noqa: F401 - re-exported
from .nvml_start import STALE_LIBRARY, NvmlUnavailable, import_pynvml, start_nvml  # noqa: F401 - re-exported
from .ring_sampler import RingSampler

if TYPE_CHECKING:
    import pandas as pd  # tables are made on request: the daemon samples without pandas

LOST_CODES = ("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_GPU_NOT_FOUND", "NVML_ERROR_RESET_REQUIRED")
MAX_GAPS = 10_000
"""Gap rows kept; later ones are counted in ``gaps_dropped``."""


class NvmlSampler(Probe, RingSampler):
    """Per-GPU NVML metrics (and GPM on Hopper and later) on a sampling thread; one ring column per (GPU, metric).

    Parameters
    ----------
    devices : sequence of int, optional
        GPU indices (NVML's order); all by default.
    pids : sequence of int, optional
        Processes whose GPU memory is sampled (``process_memory_bytes.<pid>`` on each GPU).
    interval_s : float
        Time between samples (default 0.1: 10 Hz).
    capacity : int
        Samples kept per channel (default 18,000: 30 min at 10 Hz; 8 bytes x channels x capacity of memory).
    nvml : module, optional
        An object with pynvml's API (default: ``pynvml``, imported here).
    gpm : bool or {"core", "all"}
        GPM metrics on GPUs that have them: True (``core``), ``"all"``, or False.
    gpm_min_interval_s : float
        Shortest time between two GPM snapshots (NVML refreshes them every 100 ms).
    mig_gpm : bool
        GPM per MIG GPU instance too (where ``gpm`` reads any).
    mig_gpm_interval_s : float, optional
        The shortest time between two GPM computations of one MIG GPU instance (default: ``gpm_min_interval_s``).
        A computation costs about 1.5 ms of CPU (``nvmlGpmMetricsGet``, a whole H200; per instance not yet
        measured), so 56 instances every second would be some 8% of a core: the daemon uses 10 s. The instances'
        first computations are spread evenly over this interval, not made in one tick.
    slow_interval_s : float
        How often the slow metrics are read (``temperature_c``, ``energy_j``, ``memory_clock_mhz``,
        ``process_memory_bytes.*``: default 1 s); the samples between repeat the last value. At most
        ``interval_s`` reads them at every sample.
    max_call_s : float
        A reader slower than this at the probe is left out (listed in ``unsupported``); a slow metric's reader,
        read once per ``slow_interval_s``, may take :data:`SLOW_READ_ALLOWANCE` times as long (the energy counter
        takes about 4 ms a read on an H200).
    lost_retry_s : float
        How often a lost GPU is tried again.

    Raises
    ------
    NvmlUnavailable
        When NVML cannot start or sees no GPU.
    ValueError
        For a GPU index NVML does not have, or a bad ``gpm``.
    """

    def __init__(self, devices: list[int] | None = None, pids: list[int] | None = None, interval_s: float = 0.1,
                 capacity: int = 18_000, nvml: Any = None, *, gpm: bool | str = True, gpm_min_interval_s: float = 0.1,
                 max_call_s: float = 0.005, lost_retry_s: float = 30.0, slow_interval_s: float = 1.0,
                 mig_gpm: bool = True, mig_gpm_interval_s: float | None = None) -> None:  # fmt: skip
        rows = gpm_metrics(gpm)
        self.nvml = nvml if nvml is not None else import_pynvml()
        self.pids = tuple(int(p) for p in pids or ())
        self.max_call_s, self.lost_retry_s = max_call_s, lost_retry_s
        self._lost_codes = {getattr(self.nvml, c) for c in LOST_CODES if hasattr(self.nvml, c)}
        self._unsupported: list[tuple[int, str, str]] = []
        self._gaps: list[tuple[int, int, str, str]] = []
        self.gaps_dropped = 0
        self._open = False
        start_nvml(self.nvml)
        self._open = True
        self.mig: dict[int, tuple[tuple[int, int, str], ...]] = {}
        try:
            self.layout = gpu_layout(self.nvml)
            self._gpus = self._handles(devices)
            mig_s = gpm_min_interval_s if mig_gpm_interval_s is None else float(mig_gpm_interval_s)
            channels = self._probe(rows, gpm_min_interval_s, mig_s if mig_gpm else None)
        except BaseException:
            self.close()
            raise
        self._width = len(channels)
        self.slow_every = max(1, round(slow_interval_s / interval_s)) if interval_s > 0 else 1
        self._tick = 0
        for gpu in self._gpus:  # [its read, slow, last values (repeated between slow reads), NaNs of its width, reader]
            gpu.plan = [[r.read, getattr(r, "slow", False), (NAN,) * len(r.metrics), (NAN,) * len(r.metrics), r]
                        for r, _ in gpu.readers]  # fmt: skip
            gpu.nans = (NAN,) * sum(len(r.metrics) for r, _ in gpu.readers)
        self._fast = FastTick.build(self)
        super().__init__(interval_s, capacity, channels)

    def _handles(self, devices: list[int] | None) -> list[Gpu]:
        n = self.nvml
        try:
            count = n.nvmlDeviceGetCount()
        except n.NVMLError as exc:
            raise NvmlUnavailable(f"NVML cannot count the GPUs ({describe(exc)})") from None
        if count == 0:
            raise NvmlUnavailable("no NVIDIA GPU found (NVML sees 0 devices)")
        indices = list(range(count)) if devices is None else [int(d) for d in devices]
        if bad := [d for d in indices if not 0 <= d < count]:
            raise ValueError(f"no GPU {bad} here: NVML sees {count} (0 to {count - 1})")
        gpus, self.device_names = [], {}
        for i in indices:
            try:
                handle = n.nvmlDeviceGetHandleByIndex(i)
                name = n.nvmlDeviceGetName(handle)
            except n.NVMLError as exc:
                self._unsupported.append((i, "*", f"cannot open the GPU: {describe(exc)}"))
                continue
            gpus.append(Gpu(i, handle))
            self.device_names[i] = name.decode() if isinstance(name, bytes) else str(name)
        if not gpus:
            raise NvmlUnavailable(f"no GPU could be opened ({self._unsupported[0][2]})")
        self.devices = tuple(g.index for g in gpus)
        return gpus

    def sample(self) -> np.ndarray:
        """One value per channel now; NaN where a read failed (the failure goes to :attr:`gaps`)."""
        return np.array(self.sample_list(), dtype=np.float64)

    def sample_list(self) -> list[float]:
        """:meth:`sample` as a list of numbers (floats, or ints where NVML gives whole numbers).

        The daemon's tick uses no numpy: from a cold cache each numpy call costs tens of microseconds. A tick with
        no GPU lost and no failing direct read is made by :class:`~aonkit.sources.nvml_batch.FastTick`; any error
        there sends the tick here, reading again.
        """
        fresh = self._tick % self.slow_every == 0  # the slow readers read at this sample
        self._tick += 1
        fast = self._fast
        if fast is not None and fast.calm():
            if (got := fast.tick(self, fresh)) is not None:
                return got
            if fast.dead:
                self._fast = None
        vals: list[float] = []
        add = vals.extend
        for gpu in self._gpus:
            if gpu.lost and not self._revive(gpu):
                add(gpu.nans)
                continue
            start = len(vals)
            for entry in gpu.plan:
                if entry[1] and not fresh:  # slow: its last values
                    add(entry[2])
                    continue
                if (got := self.read_entry(gpu, entry)) is None:  # lost
                    del vals[start:]
                    add(gpu.nans)
                    break
                add(got)
                if entry[1]:
                    entry[2] = got
        if len(vals) != self._width:  # a reader gave the wrong number of values: never shift the channels
            raise RuntimeError(f"NVML sample of {len(vals)} values for {self._width} channels")
        if self._fast is not None:
            self._fast.after_plain_tick()
        return vals

    def read_entry(self, gpu: Gpu, entry: list[Any]) -> tuple[float, ...] | None:
        """One plan entry's values now (NaN where it failed, recorded in :attr:`gaps`); None if the GPU is lost."""
        try:
            got = entry[0](gpu.handle)
            if gpu.failing:
                gpu.failing.difference_update(entry[4].metrics)
        except PartialRead as part:
            got = part.values
            gpu.failing.difference_update(set(entry[4].metrics) - set(part.reasons))
            for metric, why in part.reasons.items():
                self._fail(gpu, metric, why)
        except Exception as exc:
            if isinstance(exc, self.nvml.NVMLError) and getattr(exc, "value", None) in self._lost_codes:
                self._lose(gpu, exc)
                for e in gpu.plan:  # nothing read before the loss is repeated after a revival
                    e[2] = e[3]
                return None
            got = entry[3]
            for metric in entry[4].metrics:
                self._fail(gpu, metric, describe(exc))
        return got

    def _fail(self, gpu: Gpu, metric: str, why: str) -> None:
        if metric not in gpu.failing:
            gpu.failing.add(metric)
            self._gap(gpu.index, metric, why)

    def _gap(self, device: int, metric: str, why: str) -> None:
        if len(self._gaps) < MAX_GAPS:
            self._gaps.append((time.time_ns(), device, metric, why))
        else:
            self.gaps_dropped += 1

    def _lose(self, gpu: Gpu, exc: Exception) -> None:
        gpu.lost, gpu.retry_at = True, time.monotonic() + self.lost_retry_s
        gpu.failing.clear()
        self._gap(gpu.index, "*", f"{describe(exc)}; the GPU is tried again every {self.lost_retry_s:g} s")

    def _revive(self, gpu: Gpu) -> bool:
        if time.monotonic() < gpu.retry_at:
            return False
        try:
            handle = self.nvml.nvmlDeviceGetHandleByIndex(gpu.index)
            if gpu.readers:
                gpu.readers[0][0].read(handle)
        except Exception:
            gpu.retry_at = time.monotonic() + self.lost_retry_s
            return False
        gpu.handle, gpu.lost = handle, False
        if self._fast is not None:
            self._fast = FastTick.build(self)  # its calls hold the old handle
        return True

    @property
    def n_unsupported(self) -> int:
        """How many (device, metric) pairs the probe left out (:attr:`unsupported` lists them)."""
        return len(self._unsupported)

    @property
    def unsupported(self) -> pd.DataFrame:
        """Metrics left out at the probe: ``device``, ``metric`` (``"*"``: the whole GPU), ``reason``."""
        import pandas as pd

        return pd.DataFrame(self._unsupported, columns=["device", "metric", "reason"])

    @property
    def gaps(self) -> pd.DataFrame:
        """Failures while sampling: ``ts_ns`` (first failed read), ``device``, ``metric`` (``"*"``: lost), why."""
        import pandas as pd

        return pd.DataFrame(list(self._gaps), columns=["ts_ns", "device", "metric", "reason"])

    def time_readers(self, repeat: int = 20) -> pd.DataFrame:
        """Time each reader now (sampler stopped): ``device``, ``metrics``, ``nvml_calls``, ``mean_us`` a read."""
        from .nvml_timing import time_readers

        return time_readers(self, repeat)

    def close(self) -> None:
        """Stop sampling, free GPM buffers and shut NVML down (the samples stay readable).

        When the sampling thread is still inside an NVML call after :meth:`stop`'s wait (``stuck``), NVML is
        left open for it: freeing its buffers or shutting NVML down under it is not safe.
        """
        if getattr(self, "_thread", None) is not None and not self.stop():  # (no thread when the probe failed)
            return
        for gpu in getattr(self, "_gpus", []):
            for reader, _ in gpu.readers:
                if isinstance(reader, Gpm):
                    reader.close()
        if self._open:
            self._open = False
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # shutting down is best effort
                pass

    def __repr__(self) -> str:
        return (f"NvmlSampler(GPUs {list(self.devices)}, {self._width} channels, "
                f"{len(self._unsupported)} unsupported, every {self.interval_s:g} s)")  # fmt: skip


def open_gpu_sampler(**kw: Any) -> tuple[NvmlSampler | None, str]:
    """An :class:`NvmlSampler` and a one-line note, or None and why not (to sample the host only).

    Parameters
    ----------
    **kw
        :class:`NvmlSampler`'s parameters.

    Returns
    -------
    tuple of (NvmlSampler or None, str)
        E.g. ``(None, "no NVIDIA driver (NVML: NVML Shared Library Not Found); sampling the host only")``.
    """
    try:
        sampler = NvmlSampler(**kw)
    except NvmlUnavailable as exc:
        return None, f"{exc}; sampling the host only"
    n_off = sampler.n_unsupported
    return sampler, (f"sampling GPU {', '.join(map(str, sampler.devices))} through NVML: "
                     f"{len(sampler.metrics)} metrics, {n_off} left out (see .unsupported)")  # fmt: skip
