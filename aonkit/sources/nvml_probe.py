"""How :class:`~aonkit.sources.nvml.NvmlSampler` picks each GPU's readers when it is made (a mixin of it).

Every reader of :func:`~aonkit.sources.nvml_metrics.device_readers` is tried twice on each GPU and kept if it
works fast enough; on a GPU in MIG mode also each GPU instance's (:mod:`.nvml_mig`). GPM (whole GPU, then each
GPU instance) is started on every GPU first and computed once after one wait for all. What is left out goes to
the sampler's ``unsupported`` list with the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .gpm import Gpm
from .nvml_metrics import Reader, describe, device_readers, slow_where_also_measured
from .nvml_mig import MigDevice, MigGpm, by_instance, mig_devices, mig_processes, mig_readers


@dataclass
class Gpu:
    """One sampled GPU: its index and handle, its readers and their channels, and its state while sampling."""

    index: int
    handle: Any
    readers: list[tuple[Reader | Gpm, slice]] = field(default_factory=list)
    lost: bool = False
    retry_at: float = 0.0
    failing: set[str] = field(default_factory=set)
    plan: list[list[Any]] = field(default_factory=list)
    nans: tuple[float, ...] = ()


SLOW_READ_ALLOWANCE = 10
"""How many times ``max_call_s`` a slow metric's reader may take at the probe."""


class Probe:
    """The probe of :class:`~aonkit.sources.nvml.NvmlSampler`.

    It uses the sampler's ``nvml``, ``pids``, ``max_call_s``, ``mig``, ``_gpus`` and ``_unsupported``.
    """

    nvml: Any
    pids: tuple[int, ...]
    max_call_s: float
    mig: dict[int, tuple[tuple[int, int, str], ...]]
    _gpus: list[Gpu]
    _unsupported: list[tuple[int, str, str]]

    def _probe(self, rows: list[tuple[str, int, float]], gpm_min_interval_s: float,
               mig_gpm_s: float | None = None) -> list[tuple[int, str]]:  # fmt: skip
        """Pick each GPU's readers; the channels, each GPU's together (its NVML readers, then GPM).

        ``mig_gpm_s``: the GPM interval of each MIG GPU instance (None: none); their first computations are spread.
        """
        picked: dict[int, list[Reader | Gpm]] = {gpu.index: [] for gpu in self._gpus}
        gpms = []
        for gpu in self._gpus:
            devices = self._mig(gpu)
            instances = by_instance(devices)
            groups = [[*g, mig_processes(self.nvml, devices, self.pids)]  # its MIG devices', if NVML refuses
                      if devices and g[0].metrics[0].startswith("process_memory_bytes.") else g
                      for g in device_readers(self.nvml, self.pids)]  # fmt: skip
            groups += [g for d in instances.values() for g in mig_readers(self.nvml, d)]
            for group in groups:
                if (reader := self._pick(gpu, group)) is not None:
                    picked[gpu.index].append(reader)
            per_instance = tuple(instances) if mig_gpm_s is not None else ()
            for gi in (None, *per_instance) if rows else ():  # GPM of the whole GPU, then of each GPU instance
                g = None
                try:
                    g = (Gpm(self.nvml, gpu.handle, rows, gpm_min_interval_s) if gi is None
                         else MigGpm(self.nvml, gpu.handle, gi, rows, mig_gpm_s))  # fmt: skip
                    g.start(gpu.handle)
                    gpms.append((gpu, g))
                except Exception as exc:
                    if g is not None:
                        g.close()
                    self._skip(gpu.index, [r[0] + ("" if gi is None else f".gi{gi}") for r in rows], describe(exc))
        for gpu, g in gpms:  # one wait of gpm_min_interval_s for all GPUs
            try:
                refused = g.probe(gpu.handle)
            except Exception as exc:
                g.close()
                self._skip(gpu.index, g.metrics, describe(exc))
                continue
            for name, why in refused.items():
                self._skip(gpu.index, [name], why)
            if g.metrics:
                picked[gpu.index].append(g)
        spread = [g for _, g in gpms if isinstance(g, MigGpm) and g.metrics]
        for k, g in enumerate(spread):  # not every instance's computation in one tick: one every interval / n
            g.due_in(mig_gpm_s * (k + 1) / len(spread))
        channels: list[tuple[int, str]] = []
        for gpu in self._gpus:
            slow_where_also_measured(picked[gpu.index])
            for reader in picked[gpu.index]:
                gpu.readers.append((reader, slice(len(channels), len(channels) + len(reader.metrics))))
                channels.extend((gpu.index, m) for m in reader.metrics)
        return channels

    def _mig(self, gpu: Gpu) -> list[MigDevice]:
        """The GPU's MIG devices, noted in :attr:`mig`; [] without MIG (or when they cannot be listed: said)."""
        try:
            devices = mig_devices(self.nvml, gpu.handle)
        except Exception as exc:
            self._skip(gpu.index, ["mig.*"], f"MIG is enabled but its devices cannot be listed: {describe(exc)}")
            return []
        if devices is None:
            return []
        self.mig[gpu.index] = tuple((d.gi, d.ci, d.uuid) for d in devices)
        return devices

    def _pick(self, gpu: Gpu, group: list[Reader]) -> Reader | None:
        """The first reader of ``group`` that works twice, fast enough; else list its metrics as unsupported."""
        reasons = []
        for reader in group:
            try:
                costs = []
                for _ in range(2):  # the second read also gives rates their first value
                    t0 = time.perf_counter()
                    reader.read(gpu.handle)
                    costs.append(time.perf_counter() - t0)
            except Exception as exc:
                reasons.append(describe(exc))
                continue
            limit = self.max_call_s * (SLOW_READ_ALLOWANCE if getattr(reader, "slow", False) else 1)
            if min(costs) <= limit:
                return reader
            reasons.append(f"too slow to sample: {min(costs) * 1e3:.1f} ms a read (limit {limit * 1e3:g} ms)")
        self._skip(gpu.index, group[0].metrics, "; ".join(dict.fromkeys(reasons)))  # each reason once
        return None

    def _skip(self, device: int, metrics: tuple[str, ...] | list[str], why: str) -> None:
        self._unsupported.extend((device, m, why) for m in metrics)

