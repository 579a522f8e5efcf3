"""Unchecked loads from a ``uint8`` buffer for the scanner's hot loops.

Numba reads ``buf[i]`` with a signed ``i`` through a wrap-around for negative
positions: a compare and a conditional move on every access, which also keeps
LLVM from merging eight byte loads into one word load. The scanner's positions
are never negative and are checked against the end before a byte is read, so
these loads leave the wrap-around out. Like every kernel here (``boundscheck``
is off), they read whatever lies at the position: the caller keeps it in range.
"""

from __future__ import annotations

import sys

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_BIG_ENDIAN = sys.byteorder == "big"


def _pointer(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    pos = context.cast(builder, args[1], sig.args[1], types.intp)
    return builder.gep(ary.data, [pos])


def _check(arr, pos):
    ok = (
        isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8 and arr.layout == "C"
        and isinstance(pos, types.Integer)
    )  # fmt: skip
    if not ok:
        raise TypeError(f"need a contiguous 1-D uint8 array and an integer position, not {arr} and {pos}")


@intrinsic
def byte_at(typingctx, arr, pos):
    """``buf[pos]`` as ``uint8`` without the negative-index wrap-around."""
    _check(arr, pos)

    def codegen(context, builder, sig, args):
        return builder.load(_pointer(context, builder, sig, args))

    return types.uint8(arr, pos), codegen


@intrinsic
def word_at(typingctx, arr, pos):
    """Little-endian ``uint64`` of ``buf[pos:pos+8]``: one unaligned load (the caller checks ``pos + 8 <= n``)."""
    _check(arr, pos)

    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_pointer(context, builder, sig, args), ir.IntType(64).as_pointer())
        word = builder.load(ptr, align=1)
        if _BIG_ENDIAN:
            word = builder.bswap(word)
        return word

    return types.uint64(arr, pos), codegen
