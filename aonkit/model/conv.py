"""FLOPs and bytes of convolutions (1-d, 2-d, 3-d, grouped, strided, dilated, transposed) from recorded shapes.

Input ``x (N, Cin, *S)``, weight ``w (Cout, Cin/groups, *K)`` (transposed:
``w (Cin, Cout/groups, *K)``). Output size per spatial dimension::

    out = (in + 2*pad - dil*(k - 1) - 1) // stride + 1                 # forward
    out = (in - 1)*stride - 2*pad + dil*(k - 1) + output_padding + 1   # transposed

``padding="valid"`` is 0 and ``"same"`` keeps the input size. Every output
element of a forward convolution is a dot product of ``prod(w.shape[1:])``
multiply-adds; a transposed one scatters every input element over
``prod(w.shape[1:])`` outputs::

    flops = 2 * numel(out) * prod(w.shape[1:])     # forward
    flops = 2 * numel(x) * prod(w.shape[1:])       # transposed
    bytes = bytes(x) + bytes(w) + bytes(bias) + numel(out) * itemsize(x)

The bias add is not counted, as in the PyTorch profiler's ``flops``.
``convolution_backward`` computes the gradients its ``output_mask`` asks for:
grad_input and grad_weight cost the forward FLOPs each (taken from
``grad_out``, so no stride or padding is needed) and grad_bias
``numel(grad_out)`` adds::

    flops = F * (mask[0] + mask[1]) + numel(grad_out) * mask[2]
    bytes = bytes(grad_out) + mask[0]*bytes(w) + mask[1]*bytes(x)            # read
          + mask[0]*bytes(x) + mask[1]*bytes(w) + mask[2]*Cout*itemsize       # written
"""

from __future__ import annotations

import math

from .shapes import OpCost, OpInputs

# name: (bias, stride, padding, dilation, transposed (index or fixed bool), output_padding, groups)
CONVS: dict[str, tuple[int | None, int, int, int, int | bool, int | None, int]] = {
    "conv1d": (2, 3, 4, 5, False, None, 6), "conv2d": (2, 3, 4, 5, False, None, 6),
    "conv3d": (2, 3, 4, 5, False, None, 6), "convolution": (2, 3, 4, 5, 6, 7, 8),
    "_convolution": (2, 3, 4, 5, 6, 7, 8), "conv_transpose1d": (2, 3, 4, 7, True, 5, 6),
    "conv_transpose2d": (2, 3, 4, 7, True, 5, 6), "conv_transpose3d": (2, 3, 4, 7, True, 5, 6),
    "cudnn_convolution": (None, 3, 2, 4, False, None, 5), "cudnn_convolution_transpose": (None, 4, 2, 5, True, 3, 6),
    "mkldnn_convolution": (2, 4, 3, 5, False, None, 6), "miopen_convolution": (2, 4, 3, 5, False, None, 6),
}  # fmt: skip
"""Forward convolution ops and where their arguments sit (schemas of ``native_functions.yaml``)."""

# name: (grad_out, input, weight, transposed index, output_mask index)
CONV_BACKWARDS: dict[str, tuple[int, int, int, int | None, int]] = {
    "convolution_backward": (0, 1, 2, 7, 10),
    "cudnn_convolution_backward": (1, 0, 2, None, 10),
}


def _per_dim(value: object, n: int, default: int) -> list[int]:
    if value is None:
        return [default] * n
    vals = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) for v in vals) or len(vals) not in (1, n):
        raise ValueError(f"cannot read {value!r} as {n} sizes")
    return [int(v) for v in vals] * (n if len(vals) == 1 else 1)


def conv_output_size(
    size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1, transposed: bool = False,
    output_padding: int = 0,
) -> int:  # fmt: skip
    """Output length of one spatial dimension (formulas in the module doc)."""
    if transposed:
        return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of a forward convolution op (:data:`CONVS`); see the module doc."""
    ibias, istride, ipad, idil, itr, iopad, igroups = CONVS[name]
    inp, w = x.shape(0), x.shape(1)
    if inp is None or w is None or len(w) < 3:
        raise ValueError("input or weight not recorded")
    if len(inp) == len(w) - 1:  # unbatched input (C, *S)
        inp = (1, *inp)
    n = len(w) - 2
    transposed = x.value(itr) is True if isinstance(itr, int) and not isinstance(itr, bool) else bool(itr)
    pad = x.value(ipad)
    if pad is None:
        raise ValueError("padding not recorded (no Concrete Inputs)")
    stride = _per_dim(x.value(istride), n, 1)
    dil = _per_dim(x.value(idil), n, 1)
    opad = _per_dim(x.value(iopad), n, 0) if iopad is not None else [0] * n
    if pad == "same":
        out_sp = list(inp[2:])
    else:
        pads = [0] * n if pad == "valid" else _per_dim(pad, n, 0)
        out_sp = [conv_output_size(*a, transposed, o) for a, o in zip(zip(inp[2:], w[2:], stride, pads, dil), opad)]
    groups = x.value(igroups, 1)
    cout = w[1] * int(groups) if transposed else w[0]
    out_numel = inp[0] * cout * math.prod(out_sp)
    per = math.prod(w[1:])
    flops = 2.0 * (math.prod(inp) if transposed else out_numel) * per
    read = x.nbytes(0) + x.nbytes(1) + (x.nbytes(ibias) if ibias is not None else 0.0)
    return OpCost(flops, read + out_numel * x.itemsize(0), x.dtype(0) or "", "conv")


def conv_backward_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of a convolution backward op (:data:`CONV_BACKWARDS`); see the module doc."""
    igo, ix, iw, itr, imask = CONV_BACKWARDS[name]
    go, inp, w = x.shape(igo), x.shape(ix), x.shape(iw)
    if go is None or inp is None or w is None:
        raise ValueError("grad_out, input or weight not recorded")
    transposed = itr is not None and x.value(itr) is True
    mask = x.value(imask, [True, True, False])
    if not isinstance(mask, list) or len(mask) != 3:
        raise ValueError(f"output_mask {mask!r}")
    m_in, m_w, m_b = (bool(m) for m in mask)
    fwd = 2.0 * (math.prod(inp) if transposed else math.prod(go)) * math.prod(w[1:])
    flops = fwd * (m_in + m_w) + math.prod(go) * m_b
    size = x.itemsize(igo)
    cout = go[1] if len(go) > 1 else 1
    read = x.nbytes(igo) + m_in * x.nbytes(iw) + m_w * x.nbytes(ix)
    written = m_in * math.prod(inp) * size + m_w * math.prod(w) * size + m_b * cout * size
    return OpCost(flops, read + written, x.dtype(igo) or "", "conv")
