"""Speculative decoding in the serving simulation: how many verify iterations each request's output takes.

An iteration yields a sequence ``G`` tokens: the drafted ones the target accepts before its first rejection (at
most ``k``, each accepted with probability ``a``) and one of its own, so ``P(G > j) = a**j`` for ``j <= k``. From
one uniform ``u`` in ``[0, 1)``: ``G - 1`` is the number of ``j`` in ``1..k`` with ``1 - u <= a**j`` (``1 - u`` is
in ``(0, 1]``; ``k`` comparisons without a branch, faster than a logarithm).
A request whose output is ``o`` tokens gets its first from its prefill and the other ``o - 1`` from iterations,
the last one's yield cut to what is left. Loops index with ``range(n)`` from 0.
"""

from __future__ import annotations

from ._jit import njit


@njit
def draw_iterations(left, u, pw, steps, pos):
    """Count iterations for ``left`` tokens a request, from ``pos[0]`` on, using the uniforms ``u`` in order.

    ``steps[i]`` gets request ``i``'s iterations. ``pos`` is the state between calls: (request, its tokens still
    to come, its iterations so far); a call returns the uniforms it used, all of ``u`` when it ran out of them
    before the last request (call again with more: ``pos`` says where it stopped). ``pw``: ``a**j`` for ``j`` in
    ``0..k`` (``a`` in ``(0, 1)``; 0 and 1 need no draws: one token an iteration, or ``k + 1``).
    """
    n = left.shape[0]
    m = u.shape[0]
    k = pw.shape[0] - 1
    used = 0
    i, rest, it = pos[0], pos[1], pos[2]
    while i < n:
        if rest < 0:  # a new request
            rest, it = left[i], 0
        while rest > 0:
            if used == m:
                pos[0], pos[1], pos[2] = i, rest, it
                return used
            v = 1.0 - u[used]
            used += 1
            acc = 0
            for j in range(k):  # every power compared, no early exit: no branch to mispredict
                acc += v <= pw[j + 1]
            rest -= 1 + acc
            it += 1
        steps[i] = it
        i += 1
        rest = -1
    pos[0], pos[1], pos[2] = n, -1, 0
    return used
