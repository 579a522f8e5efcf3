"""The NVML sampler's common tick in few Python steps: every direct read of every GPU into one buffer, one unpack.

A tick of :meth:`~aonkit.sources.nvml.NvmlSampler.sample_list` that reads each reader through its own closure
spends more in Python than in NVML: on the dev VM, 8 simulated GPUs took 78 µs warm for 40 calls whose ctypes
calls alone take about 20, and three to four times that just after the 10 Hz wake-up. :class:`FastTick` makes
the same C calls (each direct reader's :class:`~aonkit.sources.nvml_direct.Batchable`) with their outputs at fixed
places of one buffer, unpacks it with one ``struct`` call and puts the values in channel order with one
``itemgetter``. The other readers (counter rates, GPM when it is due, the slow metrics when due) are read as the
sampler reads them (:meth:`~aonkit.sources.nvml.NvmlSampler.read_entry`); the slow metrics' and GPM's last values
are kept as tuples (a GPM read before it is due repeats its last values, so it is not made).

It runs only while no GPU is lost and none of its metrics is failing (:meth:`FastTick.calm`). Any NVML error in
its calls (a call's return code, a field's ``nvmlReturn``) or a lost GPU returns None, and the sampler reads the
whole tick again its own way, which records the error as it always did: the direct reads are plain queries, so a
second read is harmless. Little-endian CPUs only (a field value's 4-byte type is its first bytes there).
"""

from __future__ import annotations

import ctypes
import struct
import sys
import time
from operator import itemgetter
from typing import Any

from .nvml_direct import RET_AT, TYPE_AT, UINT, WHOLE

_ALL = (1 << 64) - 1


class FastTick:
    """The batched tick of one :class:`~aonkit.sources.nvml.NvmlSampler`; made by :meth:`build`.

    Attributes
    ----------
    dead : bool
        True once a field value came in a type it does not unpack (the sampler stops using it).
    """

    def __init__(self) -> None:
        self.dead = False
        # the readers read their own way, (gpu, plan entry) each: the slow ones, those with a due time (GPM),
        # the other fast ones (counter rates); and their widths
        self.slow: list[tuple[Any, list[Any]]] = []
        self.gated: list[tuple[Any, list[Any]]] = []
        self.others: list[tuple[Any, list[Any]]] = []
        self._n = {"slow": 0, "gated": 0, "other": 0}
        self.gated_values: tuple[float, ...] = ()
        self.gated_due = 0.0
        self.watch: list[tuple[Any, frozenset[str]]] = []  # each GPU and the metrics read here
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []
        self.scaled: list[tuple[int, int, float]] = []  # (item, mask, per) of values made on each tick
        self.expected: tuple[int, ...] | None = None
        self.slow_values: tuple[float, ...] = ()
        self._fields: list[tuple[int, int, int]] = []  # (type, return, value) items of each field value
        self._sources: list[tuple[str, int]] = []  # each channel: (kind of source, index in it)
        self.buf = ctypes.create_string_buffer(0)

    @classmethod
    def build(cls, sampler: Any) -> FastTick | None:
        """The batched tick, or None where no reader can be batched (or on a big-endian CPU)."""
        if sys.byteorder != "little":
            return None
        self = cls()
        groups = {"slow": self.slow, "gated": self.gated, "other": self.others}
        outputs = []
        for gpu in sampler._gpus:
            names: set[str] = set()
            for entry in gpu.plan:
                spec, width = getattr(entry[0], "batch", None), len(entry[4].metrics)
                if entry[1] or spec is None:
                    kind = "slow" if entry[1] else "gated" if hasattr(entry[4], "due_at") else "other"
                    groups[kind].append((gpu, entry))
                    self._sources += [(kind, self._n[kind] + k) for k in range(width)]
                    self._n[kind] += width
                else:
                    outputs.append((gpu, spec, len(self._sources)))
                    self._sources += [("pending", -1)] * width
                    names.update(entry[4].metrics)
            self.watch.append((gpu, frozenset(names)))
        if not outputs:
            return None
        self._layout(outputs)
        self.after_plain_tick()
        return self

    def _layout(self, outputs: list[tuple[Any, Any, int]]) -> None:
        """Place each call's output in the buffer; the unpack format; each channel's source."""
        at, places = 0, []
        for _, spec, _ in outputs:
            places.append(at)
            at += -(-spec.size // 8) * 8
        self.buf = ctypes.create_string_buffer(max(at, 8))
        wanted: list[tuple[int, str]] = []  # (buffer offset, struct code) of every number unpacked
        for (gpu, spec, _), off in zip(outputs, places):
            if spec.init:
                ctypes.memmove(ctypes.addressof(self.buf) + off, spec.init, len(spec.init))
            device = gpu.handle if spec.handle is None else spec.handle  # (a MIG device's reader: its own)
            self.calls.append((spec.fn, (device, *spec.before, ctypes.byref(self.buf, off))))
            wanted += [(off + o, code) for o, code in spec.values]
            if spec.field:
                wanted += [(off + TYPE_AT, "I"), (off + RET_AT, "I")]
        wanted.sort()
        fmt, pos, item_of = "<", 0, {}
        for i, (o, code) in enumerate(wanted):
            fmt += f"{o - pos}x{code}" if o > pos else code
            pos, item_of[o] = o + struct.calcsize("<" + code), i
        self.unpack = struct.Struct(fmt).unpack_from
        for (_, spec, channel), off in zip(outputs, places):
            for j, (o, _) in enumerate(spec.values):
                i = item_of[off + o]
                if spec.field:
                    self._fields.append((item_of[off + TYPE_AT], item_of[off + RET_AT], i))
                if spec.field or spec.per != 1.0:
                    self.scaled.append((i, -1, spec.per))  # a field's mask comes with its type (_learn)
                    self._sources[channel + j] = ("scaled", len(self.scaled) - 1)
                else:
                    self._sources[channel + j] = ("raw", i)
        self.check = _getter([i for t, r, _ in self._fields for i in (t, r)]) if self._fields else None
        base = {"raw": 0, "scaled": len(wanted)}
        base["slow"] = base["scaled"] + len(self.scaled)
        base["gated"] = base["slow"] + self._n["slow"]
        base["other"] = base["gated"] + self._n["gated"]
        self.pick = _getter([base[kind] + i for kind, i in self._sources])

    def calm(self) -> bool:
        """No GPU lost and none of the metrics read here failing."""
        for gpu, names in self.watch:
            if gpu.lost or (gpu.failing and not gpu.failing.isdisjoint(names)):
                return False
        return True

    def _learn(self, got: tuple[int, ...]) -> bool:
        """Take the field values' types from a read; False (and :attr:`dead` if a type is not unpacked here)."""
        types, rets = got[0::2], got[1::2]
        if any(rets):
            return False
        if any(t != UINT and t not in WHOLE for t in types):
            self.dead = True
            return False
        mask = {v: (0xFFFFFFFF if t == UINT else _ALL) for (_, _, v), t in zip(self._fields, types)}
        self.scaled = [(i, mask.get(i, m), per) for i, m, per in self.scaled]
        self.expected = got
        return True

    def tick(self, sampler: Any, fresh: bool) -> list[float] | None:
        """The tick's values in channel order, or None: an error, for the sampler to read the tick again."""
        for fn, args in self.calls:
            if fn(*args):
                return None
        raw = self.unpack(self.buf)
        if self.check is not None and (got := self.check(raw)) != self.expected and not self._learn(got):
            return None
        scaled = [(raw[i] & m) / per for i, m, per in self.scaled]
        if self.gated and time.monotonic() >= self.gated_due:
            if (gpm := self._read("gated", self.gated, sampler)) is None:
                return None
            self.gated_values = gpm
            self.gated_due = min(entry[4].due_at() for _, entry in self.gated)
        if (others := self._read("other", self.others, sampler)) is None:
            return None
        if fresh:
            if (slow := self._read("slow", self.slow, sampler)) is None:
                return None
            self.slow_values = slow
        return list(self.pick((*raw, *scaled, *self.slow_values, *self.gated_values, *others)))

    def _read(self, kind: str, group: list[tuple[Any, list[Any]]], sampler: Any) -> tuple[float, ...] | None:
        """The values of ``group``'s readers, read as the sampler reads them; None if a GPU was lost.

        A slow reader's values are kept in its entry. A wrong number of values raises, as in the sampler's tick.
        """
        got: list[float] = []
        for gpu, entry in group:
            if (vals := sampler.read_entry(gpu, entry)) is None:
                return None
            if entry[1]:
                entry[2] = vals
            got += vals
        if len(got) != self._n[kind]:
            raise RuntimeError(f"NVML readers ({kind}) gave {len(got)} values for {self._n[kind]} channels")
        return tuple(got)

    def after_plain_tick(self) -> None:
        """After a tick read reader by reader (or none yet): keep its slow values and GPM's, and when GPM is due."""
        self.slow_values = tuple(v for _, entry in self.slow for v in entry[2])
        if self.gated:
            self.gated_values = tuple(v for _, entry in self.gated for v in entry[4].values)
            self.gated_due = min(entry[4].due_at() for _, entry in self.gated)


def _getter(indices: list[int]) -> Any:
    """``itemgetter(*indices)``, giving a tuple even for one index."""
    if len(indices) == 1:
        i = indices[0]
        return lambda t: (t[i],)
    return itemgetter(*indices)
