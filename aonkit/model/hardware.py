"""Device ceilings for roofline models: :class:`DeviceSpec` and the name lookup :func:`device_spec`.

A spec holds the peak *dense* throughput per data type (no 2:4 sparsity), the
peak memory bandwidth and where every number comes from. The built-in table
(:data:`DEVICES`) is filled from vendor datasheets (see
``aonkit/model/nvidia.py`` and ``aonkit/model/amd.py``); measured or
user-given ceilings replace them through :meth:`DeviceSpec.with_ceilings` or a
new ``DeviceSpec(...)``.

Peak keys (FLOP/s, int8 in OP/s):

===============  ===============================================================
key              meaning
===============  ===============================================================
``fp64``         FP64 on the vector (CUDA core / SIMD) units
``fp64_matrix``  FP64 on the matrix units (NVIDIA FP64 Tensor Core, AMD matrix)
``fp32``         FP32 on the vector units
``fp32_matrix``  FP32 on the matrix units (AMD CDNA only)
``tf32``         TF32 on the matrix units
``bf16``         BF16, matrix units where the device has them
``fp16``         FP16, matrix units where the device has them
``fp8``          FP8 on the matrix units
``int8``         INT8 on the matrix units (OP/s)
===============  ===============================================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

PEAK_KEYS: tuple[str, ...] = ("fp64", "fp64_matrix", "fp32", "fp32_matrix", "tf32", "bf16", "fp16", "fp8", "int8")
"""Data-type keys of :attr:`DeviceSpec.peak_flops`."""


@dataclass(frozen=True)
class DeviceSpec:
    """Ceilings of one device for roofline models.

    Parameters
    ----------
    name : str
        Display name, e.g. ``"H100 SXM"``.
    peak_flops : mapping of str to float
        Peak dense FLOP/s (int8: OP/s) per key of :data:`PEAK_KEYS`; keys the
        device does not support are left out.
    memory_bandwidth : float
        Peak device-memory bandwidth in bytes/s.
    memory_bytes : int, optional
        Device memory in bytes, as the datasheet states it (10**9 per GB).
    l2_bandwidth : float, optional
        L2 bandwidth in bytes/s (vendors rarely publish it; measured values go here).
    compute_units : int, optional
        SMs (NVIDIA) or CUs (AMD); used only to tell similar devices apart.
    sources : mapping of str to str
        Where each number comes from: keys are peak keys, ``"memory_bandwidth"``,
        ``"memory_bytes"`` and ``"l2_bandwidth"``.
    match : str, optional
        Case-insensitive regular expression matched against device names as
        traces spell them (Kineto ``deviceProperties[].name``, Nsight Systems
        GPU names).
    notes : str
        Caveats (derived numbers, assumptions).
    """

    name: str
    peak_flops: Mapping[str, float]
    memory_bandwidth: float
    memory_bytes: int | None = None
    l2_bandwidth: float | None = None
    compute_units: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    match: str | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        bad = [k for k, v in self.peak_flops.items() if k not in PEAK_KEYS or not v > 0]
        if bad:
            raise ValueError(f"{self.name}: unknown peak keys or non-positive peaks {bad}; keys are {PEAK_KEYS}")
        if not self.memory_bandwidth > 0:
            raise ValueError(f"{self.name}: memory_bandwidth must be > 0 bytes/s")
        object.__setattr__(self, "peak_flops", dict(self.peak_flops))  # own copies: treat as read-only
        object.__setattr__(self, "sources", dict(self.sources))

    def __hash__(self) -> int:
        return hash((self.name, self.memory_bandwidth, tuple(sorted(self.peak_flops.items()))))

    def __deepcopy__(self, memo: dict) -> DeviceSpec:
        return self  # immutable by contract; pandas deep-copies DataFrame.attrs on every operation

    def peak(self, key: str) -> float:
        """Peak FLOP/s for ``key`` (see :data:`PEAK_KEYS`); NaN when the device has none."""
        return float(self.peak_flops.get(key, math.nan))

    def ridge(self, key: str) -> float:
        """Ridge point in FLOP/byte: ``peak(key) / memory_bandwidth``."""
        return self.peak(key) / self.memory_bandwidth

    def with_ceilings(
        self,
        *,
        name: str | None = None,
        memory_bandwidth: float | None = None,
        l2_bandwidth: float | None = None,
        source: str = "user-given",
        **peaks: float,
    ) -> DeviceSpec:
        """A copy with measured or user-given ceilings replacing the datasheet ones.

        Parameters
        ----------
        name : str, optional
            New display name (default: ``"<name> (measured)"``).
        memory_bandwidth, l2_bandwidth : float, optional
            Bytes/s.
        source : str
            Recorded in :attr:`sources` for every replaced number.
        **peaks : float
            Peak FLOP/s by key, e.g. ``bf16=700e12``.

        Returns
        -------
        DeviceSpec
        """
        sources = dict(self.sources)
        new_peaks = {**self.peak_flops, **peaks}
        changed = dict(peaks)
        if memory_bandwidth is not None:
            changed["memory_bandwidth"] = memory_bandwidth
        if l2_bandwidth is not None:
            changed["l2_bandwidth"] = l2_bandwidth
        sources.update({k: source for k in changed})
        return replace(
            self,
            name=name or f"{self.name} (measured)",
            peak_flops=new_peaks,
            memory_bandwidth=memory_bandwidth if memory_bandwidth is not None else self.memory_bandwidth,
            l2_bandwidth=l2_bandwidth if l2_bandwidth is not None else self.l2_bandwidth,
            sources=sources,
        )


def datasheet_spec(
    name: str,
    source: str,
    tflops: Mapping[str, float],
    bandwidth_gbs: float,
    memory_gb: float | None = None,
    compute_units: int | None = None,
    match: str | None = None,
    notes: str = "",
    **sources: str,
) -> DeviceSpec:
    """A spec in datasheet units (TFLOP/s, GB/s, GB = 10**9 bytes), every number cited to ``source``.

    ``sources`` overrides the citation of single numbers (``memory_bandwidth="..."``).
    """
    cited = {k: source for k in (*tflops, "memory_bandwidth", *(("memory_bytes",) if memory_gb else ()))}
    return DeviceSpec(
        name=name,
        peak_flops={k: v * 1e12 for k, v in tflops.items()},
        memory_bandwidth=bandwidth_gbs * 1e9,
        memory_bytes=round(memory_gb * 1e9) if memory_gb else None,
        compute_units=compute_units,
        sources={**cited, **sources},
        match=match,
        notes=notes,
    )


_GB = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


def _distance(spec: DeviceSpec, memory_bytes: int | None, compute_units: int | None) -> float:
    d = 0.0
    if memory_bytes and spec.memory_bytes:
        d += abs(math.log(memory_bytes / spec.memory_bytes))
    if compute_units and spec.compute_units:
        d += abs(compute_units - spec.compute_units) / spec.compute_units
    return d


def device_spec(
    name: str,
    memory_bytes: int | None = None,
    compute_units: int | None = None,
    table: tuple[DeviceSpec, ...] | None = None,
) -> DeviceSpec:
    """The spec of a device named as in a trace, e.g. ``"NVIDIA H100 80GB HBM3"`` or ``"AMD Instinct MI300X"``.

    An exact (case-insensitive) :attr:`DeviceSpec.name` wins. Otherwise every
    spec whose :attr:`DeviceSpec.match` finds the name is a candidate; among
    several (A100 40 GB and 80 GB, MI250X and MI250 GCDs) the one closest in
    memory size (``memory_bytes``, else a ``"<n>GB"`` in the name) and in
    ``compute_units`` wins, then the first listed.

    Parameters
    ----------
    name : str
        Device name (Kineto ``deviceProperties[].name``, Nsight Systems GPU name).
    memory_bytes : int, optional
        Device memory (``deviceProperties[].totalGlobalMem``).
    compute_units : int, optional
        SM or CU count (``deviceProperties[].numSms``).
    table : tuple of DeviceSpec, optional
        Specs to search (default :data:`DEVICES`).

    Returns
    -------
    DeviceSpec

    Raises
    ------
    KeyError
        When no spec matches; pass your own ``DeviceSpec`` then.
    """
    from .amd import AMD
    from .nvidia import NVIDIA

    specs = table if table is not None else NVIDIA + AMD
    for spec in specs:
        if spec.name.lower() == name.strip().lower():
            return spec
    found = [s for s in specs if s.match and re.search(s.match, name, re.IGNORECASE)]
    if not found:
        raise KeyError(f"no device spec matches {name!r}; known: {[s.name for s in specs]}; pass spec=DeviceSpec(...)")
    if memory_bytes is None and (m := _GB.search(name)):
        memory_bytes = int(m.group(1)) * 10**9
    return min(found, key=lambda s: _distance(s, memory_bytes, compute_units))  # min keeps the first on ties


def devices() -> tuple[DeviceSpec, ...]:
    """Every built-in spec (NVIDIA, then AMD)."""
    from .amd import AMD
    from .nvidia import NVIDIA

    return NVIDIA + AMD
