"""Which op names have a cost model, and the cost of one recorded op call.

Names are matched without their ``aten::`` namespace; a trailing ``_``
(in-place variant: ``add_``, ``relu_``) maps to the out-of-place entry.
"""

from __future__ import annotations

from collections.abc import Callable

from .conv import CONV_BACKWARDS, CONVS, conv_backward_cost, conv_cost
from .matmul import ATTENTION, GEMMS, attention_cost, gemm_cost
from .pointwise import COPIES, ELEMENTWISE, NORMS, REDUCTIONS, SOFTMAX, elementwise_cost, norm_cost, reduction_cost
from .shapes import OpCost, OpInputs

_Formula = Callable[[str, OpInputs], OpCost]
FORMULAS: dict[str, _Formula] = {
    **dict.fromkeys(GEMMS, gemm_cost),
    **dict.fromkeys(ATTENTION, attention_cost),
    **dict.fromkeys(CONVS, conv_cost),
    **dict.fromkeys(CONV_BACKWARDS, conv_backward_cost),
    **dict.fromkeys(ELEMENTWISE, elementwise_cost),
    **dict.fromkeys(COPIES, elementwise_cost),
    **dict.fromkeys((*REDUCTIONS, *SOFTMAX), reduction_cost),
    **dict.fromkeys(NORMS, norm_cost),
}
"""Op base name -> cost formula."""


def base_name(name: str) -> str:
    """``"aten::add_"`` -> ``"add"``: namespace and in-place suffix dropped when that names a formula."""
    short = name.rsplit("::", 1)[-1] if name.startswith("aten::") else name
    if short not in FORMULAS and short.endswith("_") and short[:-1] in FORMULAS:
        return short[:-1]
    return short


def is_modelled(name: str) -> bool:
    """True when :func:`op_cost` has a formula for ops of this name.

    Parameters
    ----------
    name : str
        Op name as in the trace (``"aten::addmm"``, ``"aten::add_"``); the ``aten::`` namespace and an
        in-place ``_`` suffix are dropped as in :func:`base_name`.

    Returns
    -------
    bool
        Whether the name has a formula; a modelled op can still get no cost from :func:`op_cost`
        when its recorded shapes do not fit the formula.
    """
    return base_name(name) in FORMULAS


def op_cost(name: str, inputs: OpInputs) -> OpCost | None:
    """FLOPs, bytes, dtype and kind of one op call; None when the name has no formula or the shapes do not fit it.

    Parameters
    ----------
    name : str
        Op name as in the trace (``"aten::addmm"``).
    inputs : OpInputs
        Its recorded ``Input Dims``, ``Input type``, ``Concrete Inputs`` and ``Input Strides``.

    Returns
    -------
    OpCost or None
    """
    base = base_name(name)
    formula = FORMULAS.get(base)
    if formula is None:
        return None
    try:
        return formula(base, inputs)
    except (ValueError, IndexError, TypeError, ZeroDivisionError):
        return None
