"""NVML readers that call the C library directly: nvidia-ml-py's functions, without its per-call Python.

pynvml allocates each call's output struct, looks its function up under a lock and, for field values, defines a
new ctypes array type per call; over a sampling interval that costs more than the call itself (warm, on a fake
library that answers in nanoseconds: 2-5 us per simple call, 23 us for the two PCIe counters, 60-75 us for the
NVLink counters of four links). The readers here fetch each function once from pynvml (its lookup and its
"function not found" error), keep their output buffers, and unpack field values with one ``struct`` call (GPM
metrics likewise: :mod:`.gpm`). Errors are pynvml's own ``NVMLError(code)``, so the sampler handles
them as before.

:func:`direct_calls` returns None unless ``nvml`` is pynvml with its library loaded (a fake NVML, or an old
binding, keeps the pynvml readers: :func:`aonkit.sources.nvml_metrics.device_readers` lists these first).
"""

from __future__ import annotations

import ctypes
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

FIELD = "IIqqIIQ"
"""nvmlFieldValue_t (nvml.h) for ``struct``: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn, and
the value's 8 bytes as an unsigned 64-bit number (right for the unsigned long and long long types)."""
WHOLE = (2, 3)  # NVML_VALUE_TYPE_UNSIGNED_LONG, _UNSIGNED_LONG_LONG
UINT = 1  # NVML_VALUE_TYPE_UNSIGNED_INT: the low 4 of the value's 8 bytes (NVML may leave the others unset)
_LOW32 = 0xFFFFFFFF if sys.byteorder == "little" else None  # the low bytes come first only on a little-endian CPU
TYPE_AT, RET_AT, VALUE_AT = (struct.calcsize(f"={FIELD[:k]}") for k in (4, 5, 6))
"""Offsets of ``valueType``, ``nvmlReturn`` and the value in an ``nvmlFieldValue_t``."""
_BY_TYPE = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")  # pynvml's union, by nvmlValueType_t


@dataclass(frozen=True)
class Batchable:
    """How :mod:`.nvml_batch` makes a direct reader's call itself, with the output in its shared buffer.

    ``fn(handle, *before, &out)`` fills ``size`` bytes at ``out``; the reader's values are at ``values``
    (``(offset, struct code)``, in the reader's metric order), each divided by ``per``. ``init``: the output's bytes
    before the first call (a field value's id and scope; NVML writes only the outputs). ``field``: the output is
    one ``nvmlFieldValue_t``, whose ``nvmlReturn`` and ``valueType`` must be checked. ``handle``: the device the
    call reads when it is not the sampler's GPU (one of its MIG devices); None for the GPU.
    """

    fn: Callable[..., int]
    before: tuple[Any, ...]
    size: int
    values: tuple[tuple[int, str], ...]
    per: float = 1.0
    field: bool = False
    init: bytes = b""
    handle: Any = None


def _code(ctype: Any) -> str:
    """The ``struct`` code (standard size) of a 4- or 8-byte integer ctypes type."""
    code = {4: "I", 8: "Q"}[ctypes.sizeof(ctype)]
    return code.lower() if ctype(-1).value < 0 else code


class Calls:
    """pynvml's function pointers and error type, fetched once; :meth:`fn` raises pynvml's NVMLError if absent."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.error = nvml.NVMLError

    def fn(self, name: str) -> Callable[..., int]:
        """The C function ``name`` (pynvml's ``NVMLError_FunctionNotFound`` when the library lacks it)."""
        return self.nvml._nvmlGetFunctionPointer(name)

    def check(self, ret: int) -> None:
        """Raise pynvml's error for a non-zero NVML return code."""
        if ret:
            raise self.error(ret)


def direct_calls(nvml: Any) -> Calls | None:
    """:class:`Calls` when ``nvml`` is pynvml with a loaded library (after ``nvmlInit``), else None."""
    if getattr(nvml, "nvmlLib", None) is None or not hasattr(nvml, "_nvmlGetFunctionPointer"):
        return None
    return Calls(nvml)


def scalar(c: Calls, name: str, ctype: type, *args: Any, per: float = 1.0) -> Callable[[Any], tuple[float]]:
    """``handle -> (value / per,)`` of ``name(handle, *args, &out)`` with an output of ``ctype``."""
    fn, out = c.fn(name), ctype()
    ref, check = ctypes.byref(out), c.check

    def read(handle: Any) -> tuple[float]:
        check(fn(handle, *args, ref))
        return (out.value / per,)

    read.batch = Batchable(fn, args, ctypes.sizeof(ctype), ((0, _code(ctype)),), per)  # type: ignore[attr-defined]
    return read


def pair(c: Calls, name: str, out_type: type, fields: tuple[str, str]) -> Callable[[Any], tuple[float, float]]:
    """``handle -> (a, b)``: two fields of the struct (``out_type``) that ``name(handle, &out)`` fills."""
    fn, out = c.fn(name), out_type()
    ref, check = ctypes.byref(out), c.check
    a, b = fields

    def read(handle: Any) -> tuple[float, float]:
        check(fn(handle, ref))
        return (float(getattr(out, a)), float(getattr(out, b)))

    kinds = dict(out_type._fields_)
    where = tuple((getattr(out_type, f).offset, _code(kinds[f])) for f in fields)
    read.batch = Batchable(fn, (), ctypes.sizeof(out_type), where)  # type: ignore[attr-defined]
    return read


def field_counters(c: Calls, ids: Sequence[tuple[int, int]]) -> Callable[[Any], tuple[float, list[float]]]:
    """``handle -> (ts_us, values)`` of ``nvmlDeviceGetFieldValues`` for the fixed ``(fieldId, scopeId)`` ids.

    The request array is made once (NVML writes only the outputs) and unpacked with one ``struct`` call; a field
    NVML refuses raises its error, as the pynvml reader does.
    """
    fn, n = c.fn("nvmlDeviceGetFieldValues"), len(ids)
    arr = (c.nvml.c_nvmlFieldValue_t * n)()
    for k, (field_id, scope) in enumerate(ids):
        arr[k].fieldId, arr[k].scopeId = field_id, scope
    raw = memoryview(arr).cast("B")
    unpack = struct.Struct("=" + FIELD * n).unpack_from  # the machine's byte order, no padding (none in C either)
    count, ref, check = ctypes.c_int32(n), ctypes.byref(arr), c.check

    def read(handle: Any) -> tuple[float, list[float]]:
        check(fn(handle, count, ref))
        got = unpack(raw)
        if any(rets := got[5::7]):
            check(next(r for r in rets if r))
        types = got[4::7]
        if all(t in WHOLE for t in types):
            values = [float(v) for v in got[6::7]]
        else:
            values = [typed_value(arr[k].value, t) for k, t in enumerate(types)]
        return (max(got[2::7]) or time.time_ns() / 1e3), values

    return read


def field_value(c: Calls, field_id: int, scope: int, per: float = 1.0) -> Callable[[Any], tuple[float]]:
    """``handle -> (value / per,)`` of one field of ``nvmlDeviceGetFieldValues`` (instant power): one short unpack."""
    fn, arr = c.fn("nvmlDeviceGetFieldValues"), (c.nvml.c_nvmlFieldValue_t * 1)()
    arr[0].fieldId, arr[0].scopeId = field_id, scope
    raw, tail = memoryview(arr).cast("B"), struct.Struct("=IIQ").unpack_from  # valueType, nvmlReturn, value
    at = TYPE_AT
    one, ref, check = ctypes.c_int32(1), ctypes.byref(arr), c.check

    def read(handle: Any) -> tuple[float]:
        check(fn(handle, one, ref))
        kind, ret, v = tail(raw, at)
        if ret:
            check(ret)
        if kind == UINT and _LOW32:
            return ((v & _LOW32) / per,)
        return ((v if kind in WHOLE else typed_value(arr[0].value, kind)) / per,)

    read.batch = Batchable(fn, (one,), ctypes.sizeof(arr), ((VALUE_AT, "Q"),), per, field=True,
                           init=bytes(memoryview(arr).cast("B")))  # type: ignore[attr-defined]
    return read


def typed_value(value: Any, value_type: int) -> float:
    """A field value (pynvml's ``c_nvmlValue_t`` union) read as its ``nvmlValueType_t`` says, as a float."""
    if not 0 <= value_type < len(_BY_TYPE):
        raise ValueError(f"NVML gave a field value of unknown type {value_type}")
    return float(getattr(value, _BY_TYPE[value_type]))
