"""A replica's decode steps in the serving simulation (:mod:`.serving`): its state and step times.

Between two changes of its batch (a sequence finishing, a request admitted) a replica's decode steps differ
only in their context, which grows by the batch size each step; step times are linear interpolants in context, so
within one cell of the context grid they grow linearly, and :func:`decode_run` sums a cell's steps at once (and
finds the step in progress at a given instant by bisection) instead of stepping one by one. Loops index with
``range(n)`` from 0.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_leaf, njit_leaf_inline
from .serving_heap import heap_pop, heap_push, sift_down

# columns of the int64 state per replica (WOKE: woken for a waiting request, its woken step not ended; CD, CN, CB:
# the cell of decode steps kept for it, see serving_wake.py (its base context, a float, is kept in the cell array);
# KV: the KV-cache tokens its running sequences reserve, prompt plus output each, or hold (serving_paged.py: in
# units, ku a token); PRE:
# its preemptions); row n_rep holds the central
# queue's head, tail and length, in LAZY the number of lazy replicas, and in LJ how often the central queue's idle
# replicas left requests waiting (serving.py)
QH, QT, QL, RUN, HN, DSTEP, SP, SJ, PN, BUSY, DEC, TOUCH, STEPS, PTOK, DTOK, LAZY, GEN, LJ, WOKE = range(19)
CD, CN, CB, KV, PRE = range(19, 24)
NCOL = 24
LOW = (1 << 32) - 1  # an event's value is replica << 32 | the replica's generation (a lazy replica's stale event)
SHORT = 8
"""Runs of at most this many steps before the next finish, and the first steps of any run, are stepped one by one
(:func:`decode_run`): a closed form costs more than a few steps, and an arrival often ends a run early."""
LAZY_STEPS = 16
"""A replica goes lazy only when its next finish is this many steps away or more: at high load, finishes come every
few steps and the replica's events are due soon anyway (lazy cost 15-25% there, measured in session 44)."""


@njit_leaf
def drop_stale(hk, hv, n, si):
    """Drop the stale events (of lazy replicas woken since: another generation) from the one-row event heap.

    Returns the number of events left, rebuilt in place as a heap. The order events pop in is the same: (time,
    value) orders them totally.
    """
    k = 0
    for j in range(n):
        r = hv[0, j] >> 32
        if hv[0, j] & LOW == si[r, GEN]:
            hk[0, k] = hk[0, j]
            hv[0, k] = hv[0, j]
            k += 1
    for j in range(k // 2 - 1, -1, -1):
        sift_down(hk, hv, 0, j, k)
    return k


@njit_leaf_inline
def step_context(si, r, b, cs):
    """The summed context of replica ``r``'s ``b`` decoding sequences in its next decode step.

    Their prompts (``SP``) and ``cs`` tokens for each decode step each has taken, the next one included: a
    sequence joined at decode-step count ``j`` has taken ``DSTEP + 1 - j`` by then (``SJ`` sums the ``j``).
    """
    return si[r, SP] + cs * (b * (1 + si[r, DSTEP]) - si[r, SJ])


@njit_leaf_inline
def base_context(si, r, b, cs):
    """:func:`step_context` less ``b * cs * DSTEP`` (:func:`decode_run`'s ``base``).

    The context of the step after decode-step count ``d`` is this plus ``b * cs * d``.
    """
    return si[r, SP] + cs * (b - si[r, SJ])


@njit_leaf
def interp(tab, row, x0, h, x):
    """Row ``row`` of ``tab`` (values at ``x0 + k*h``) interpolated linearly at ``x``."""
    u = (x - x0) / h
    m = tab.shape[1] - 1
    k = min(max(int(u), 0), m - 1)
    return tab[row, k] + (u - k) * (tab[row, k + 1] - tab[row, k])


@njit_leaf
def end_decode_step(si, r, t, hk, hv, fin, pr, out, resv=0, ku=1, kg=1):
    """End replica ``r``'s decode step at ``t``: its decode-step count advances, the sequences it completed finish.

    A finished sequence's KV-cache tokens are free again: its prompt and output, or its prompt and ``resv`` (the
    tokens reserved for any request's output, when not 0). ``ku``, ``kg``: a paged cache's units a token and a
    sequence's growth a decode step (:mod:`.serving_paged`; 1 and 1 otherwise): it held its prompt and a slot, and
    ``kg`` for each of its ``out - 1`` decode steps.
    """
    d = si[r, DSTEP] + 1
    si[r, DSTEP] = d
    while si[r, HN] > 0 and hk[r, 0] <= d:
        j = hv[r, 0]
        heap_pop(hk, hv, r, si[r, HN])
        si[r, HN] -= 1
        fin[j] = t
        si[r, RUN] -= 1
        si[r, SP] -= pr[j]
        si[r, SJ] -= d - out[j] + 1
        si[r, KV] -= (pr[j] + 1) * ku + (out[j] - 1) * kg if resv == 0 else pr[j] + resv


@njit_leaf_inline
def end_prompts(si, r, t, pbuf, ptk, rem, first, fin, hk, hv, ctx0, left, resv=0, ku=1):
    """End the prompts (or chunks: ``ptk``) of replica ``r``'s step ending at ``t``.

    A prompt completed gives its first token at ``t`` (a preempted request's came at its first prefill) and either
    finishes (one token to produce; its KV-cache tokens freed as :func:`end_decode_step` frees them, ``ku`` units
    a token) or joins the decoding heap; the prompts in progress stay in ``pbuf`` in their order. Inlined into the
    event loop.
    """
    keep = 0
    for k in range(si[r, PN]):
        j = pbuf[r, k]
        rem[j] -= ptk[r, k]
        if rem[j] > 0:
            pbuf[r, keep] = j
            keep += 1
            continue
        if np.isnan(first[j]):
            first[j] = t
        if left[j] == 1:
            fin[j] = t
            si[r, RUN] -= 1
            si[r, KV] -= (ctx0[j] + 1) * ku if resv == 0 else ctx0[j] + resv
        else:
            heap_push(hk, hv, r, si[r, HN], si[r, DSTEP] + left[j] - 1, j)
            si[r, HN] += 1
            si[r, SP] += ctx0[j]
            si[r, SJ] += si[r, DSTEP]
    si[r, PN] = keep


@njit_leaf_inline
def cell_steps(tab, b, x0, h, overhead, c, n, cs=1.0):
    """The decode steps of batch ``b`` from context ``c`` on (``n`` at most) that share one cell of the grid.

    Returns ``(a, g, i)``: their durations are ``a + g*j`` for ``j < i`` (``a`` as :func:`interp` gives the first,
    ``g`` the growth per step), ``i >= 1`` of them before one reaches a later cell (the cells :func:`interp` picks,
    checked at the boundary). Where any of those durations falls below 0 (past the grid's end only) ``i`` is 1.
    ``cs``: context tokens a sequence gains a step (1; more with speculative decoding).
    """
    m = tab.shape[1] - 1
    u = (c - x0) / h
    k = min(max(int(u), 0), m - 1)
    lo, hi = tab[b, k], tab[b, k + 1]
    a = overhead + (lo + (u - k) * (hi - lo))
    gb = b * cs  # the batch's context growth a step
    g = gb * (hi - lo) / h
    if k < m - 1 and n > 1:  # the first step in a later cell, i >= 1 steps on
        i = max(1, min(n, int((x0 + (k + 1) * h - c) / gb) + 1))
        while i > 1 and int((c + gb * (i - 1) - x0) / h) > k:
            i -= 1
        while i < n and int((c + gb * i - x0) / h) <= k:
            i += 1
        n = i
    if a < 0 or a + g * (n - 1) < 0:
        return a, g, 1
    return a, g, n


@njit_leaf
def decode_run(tab, b, x0, h, overhead, base, d, last, end, until, cs=1.0):
    """The decode-only steps the event loop would run one by one, in closed form.

    From a step in progress ending at ``end`` with decode-step count ``d``: while ``end < until`` and ``d < last``,
    the step ends (``d += 1``) and the next starts, lasting ``overhead + interp(tab, b, x0, h, base + b*cs * d)``
    (``cs``: context tokens a sequence gains a step).
    Within one cell of the grid those durations are ``a + g*i``, so ``n`` of them sum to ``n*a + g*n(n-1)/2``; the
    first step whose end reaches ``until`` is found by bisection on that sum. The cells are the ones
    :func:`interp` picks (the same expression, checked at each boundary), so each step's duration is the
    interpolant of its own cell; sums differ from the step-by-step ones only by rounding.

    Returns
    -------
    (steps, end, busy)
        Steps ended, the end of the step then in progress, and the summed durations of the steps started.
    """
    steps = 0
    busy = 0.0
    gb = b * cs
    while end < until and d < last:
        if steps < SHORT or last - d <= SHORT:  # the first steps one by one: `until` may be near
            d += 1
            steps += 1
            dur = overhead + interp(tab, b, x0, h, base + gb * d)
            busy += dur
            end += dur
            continue
        a, g, n = cell_steps(tab, b, x0, h, overhead, base + gb * (d + 1), last - d, cs)
        if n == 1:  # (also where durations fall below 0, past the grid's end: one step, as the loop does)
            d += 1
            steps += 1
            busy += a
            end += a
            continue
        s = n * a + g * (n * (n - 1) * 0.5)
        if end + s >= until:  # the step in progress at `until` is among these: the first whose end reaches it
            lo_n, hi_n = 0, n
            while hi_n - lo_n > 1:
                mid = (lo_n + hi_n) >> 1
                if end + (mid * a + g * (mid * (mid - 1) * 0.5)) >= until:
                    hi_n = mid
                else:
                    lo_n = mid
            n = hi_n
            s = n * a + g * (n * (n - 1) * 0.5)
        d += n
        steps += n
        busy += s
        end += s
    return steps, end, busy


@njit_leaf
def commit_run(si, r, end, until, busy_s, hk, overhead, dc_tab, dc_x0, dc_h, last=-1, grow=False, cs=1.0, kg=1):
    """Run replica ``r``'s decode-only steps (:func:`decode_run`) up to its next finish or ``until``; their end.

    ``last``: the last decode-step count to reach, when before the next finish's. ``grow``: each step started holds
    ``kg`` KV-cache units more per sequence (paged: a token, or the mean tokens an iteration). ``cs``: context tokens
    a sequence gains a step.
    """
    b = si[r, HN]
    steps, end, busy = decode_run(dc_tab, b, dc_x0, dc_h, overhead, base_context(si, r, b, cs), si[r, DSTEP],
                                  hk[r, 0] - 1 if last < 0 else last, end, until, cs)  # fmt: skip
    si[r, DSTEP] += steps
    si[r, STEPS] += steps
    si[r, DTOK] += b * steps
    if grow:
        si[r, KV] += b * steps * kg
    busy_s[r] += busy
    return end


@njit_leaf
def decode_ahead(si, r, end, until, busy_s, hk, hv, fin, pr, out, overhead, dc_tab, dc_x0, dc_h, paged=False,
                 kv=0, resv=0, cs=1.0, ku=1, kg=1):
    """Run replica ``r``'s decode-only steps while each ends before ``until`` (the next arrival).

    Called as a decode-only step starts (nothing waiting for ``r``, no prompt in progress): until an
    arrival nothing else can reach ``r`` (other replicas share only the arrivals, and the central queue,
    empty, only grows with them), so its steps follow one another as the event loop would run them. Between
    two finishes the batch is the same and :func:`commit_run` runs those steps at once; a step at which a sequence
    finishes goes through :func:`end_decode_step`. Returns the end of the step in progress (for the event heap) or
    -1 when its last sequence finished and it went idle (``BUSY`` cleared).

    ``paged`` (a KV cache of ``kv`` units, ``ku`` a token, :mod:`.serving_paged`): each step started holds ``kg``
    units more for each sequence, and the run stops before a step whose units would not fit (at a step at which a
    sequence finishes, unless they fit beside the units held before the finish frees any): the event loop ends that
    step (and preempts as the next starts).
    """
    while end < until:
        d = si[r, DSTEP]
        last = hk[r, 0] - 1  # the last decode-step count before the next finish
        if paged:  # and the last before the cache is full: each step started holds a token more per sequence
            last = min(last, d + (kv - si[r, KV]) // (si[r, HN] * kg))
        if d < last:  # steps with no sequence finishing: the first few one by one, in a loop of locals
            d0 = d
            b = si[r, HN]
            sp, sj, steps, dtok, busy = si[r, SP], si[r, SJ], si[r, STEPS], si[r, DTOK], busy_s[r]
            stop = min(last, d + SHORT)
            while end < until and d < stop:
                steps += 1  # the step ending at `end`
                d += 1
                dur = overhead + interp(dc_tab, b, dc_x0, dc_h, sp + cs * (b * (1 + d) - sj))  # the next, from `end`
                dtok += b
                busy += dur
                end = end + dur
            si[r, DSTEP], si[r, STEPS], si[r, DTOK] = d, steps, dtok
            busy_s[r] = busy
            if end < until and d < last:  # the rest in closed form
                end = commit_run(si, r, end, until, busy_s, hk, overhead, dc_tab, dc_x0, dc_h, last, False, cs)
            if paged:
                si[r, KV] += b * (si[r, DSTEP] - d0) * kg  # each step ended was followed by one started
            continue
        if paged and si[r, KV] + si[r, HN] * kg > kv:  # the step starting at `end` may not fit: the event loop's
            return end
        si[r, STEPS] += 1  # the step ending at `end`: a sequence finishes
        end_decode_step(si, r, end, hk, hv, fin, pr, out, resv, ku, kg)
        b = si[r, HN]
        if b == 0:
            si[r, BUSY] = 0
            return -1.0
        ctx = step_context(si, r, b, cs)  # the next decode step, starting at `end`
        dur = overhead + interp(dc_tab, b, dc_x0, dc_h, ctx)
        si[r, DTOK] += b
        if paged:  # (it fits: the finished sequences freed their tokens)
            si[r, KV] += b * kg
        busy_s[r] += dur
        end = end + dur
    return end


@njit_leaf
def go_lazy(si, r, end, lend, lbusy, hk, overhead, dc_tab, dc_x0, dc_h, paged=False, kv=0, cs=1.0, kg=1):
    """Replica ``r``'s decode-only step in progress, ending at ``end``, makes it lazy: returns its next finish's time.

    Its steps up to that finish are taken when it comes (:func:`lazy_finish`: as computed here, kept in ``LJ`` and
    ``lbusy``) or run when a request it can take reaches it first (:func:`commit_run`, up to the step then in
    progress). ``paged`` (a KV cache of ``kv`` units, which each step started fills by ``kg`` a sequence): or up
    to the step after which the next would not fit, whichever comes first.
    """
    si[r, LAZY] = 1
    si[-1, LAZY] += 1
    lend[r] = end
    b = si[r, HN]
    last = hk[r, 0] - 1
    if paged:
        last = min(last, si[r, DSTEP] + (kv - si[r, KV]) // (b * kg))
    steps, f, busy = decode_run(dc_tab, b, dc_x0, dc_h, overhead, base_context(si, r, b, cs), si[r, DSTEP], last,
                                end, np.inf, cs)  # fmt: skip
    si[r, LJ] = steps
    lbusy[r] = busy
    return f


@njit_leaf_inline
def admits(si, r, kv, paged, ctx0, left, j, resv=0, ku=1, kg=1):
    """Whether replica ``r``'s KV cache (``kv`` tokens) admits request ``j`` now.

    Reserving (not ``paged``): its prompt plus output (or plus ``resv``, the tokens reserved for any request's
    output, when not 0) fit beside the running sequences' reservations. Paged (:mod:`.serving_paged`; ``kv`` in
    units, ``ku`` a token): its context and next slot, and a step's growth (``kg``) for each running sequence, fit
    beside what they hold.
    """
    if paged:
        return si[r, KV] + (ctx0[j] + 1) * ku + si[r, RUN] * kg <= kv
    return si[r, KV] + ctx0[j] + (left[j] if resv == 0 else resv) <= kv


@njit_leaf
def lazy_finish(si, r, q, t, arrival, max_batch, kv, paged, busy_s, lend, lbusy, hk, hv, fin, pr, out, overhead,
                dc_tab, dc_x0, dc_h, resv=0, cs=1.0, ku=1, kg=1):
    """Lazy replica ``r``'s next finish, at ``t``: its steps run, its step ending at ``t`` counted, sequences finished.

    When it can still take no request (none waiting in its queue ``q``, a full batch, or, with a queue of its own,
    no room in its KV cache for the first waiting one: ``kv`` tokens in all), none arrives now
    (``arrival``, the next arrival's time, is later: the loop starts steps after the arrivals of their instant) and
    its next finish is :data:`LAZY_STEPS` steps away or more, its next decode step starts and it stays lazy: returns
    that step's next finish (its new event). Otherwise returns -1, no longer lazy: the event loop goes on with its
    step end (it then admits, or goes idle). ``paged``: the event may be the step after which the cache is full
    (:func:`go_lazy`); it is no longer lazy then either (the next step preempts). Paged with one central queue
    (``q`` is not ``r``) it is never lazy after its event: a replica starting its step at ``t`` before it may
    preempt a request it would take, and the event loop goes on with it among the instant's replicas.
    """
    si[-1, LAZY] -= 1  # (go_lazy counts it again if it stays lazy)
    steps = si[r, LJ]  # its steps up to the finish, as go_lazy ran them
    si[r, DSTEP] += steps
    si[r, STEPS] += steps + 1  # and the step ending now
    si[r, DTOK] += si[r, HN] * steps
    if paged:
        si[r, KV] += si[r, HN] * steps * kg  # each step ended was followed by one started
    busy_s[r] += lbusy[r]
    end_decode_step(si, r, t, hk, hv, fin, pr, out, resv, ku, kg)
    b = si[r, HN]
    if (b == 0 or arrival <= t or hk[r, 0] - si[r, DSTEP] <= LAZY_STEPS
            or (paged and (si[r, KV] + b * kg > kv or q != r))
            or (si[q, QL] > 0 and si[r, RUN] < max_batch and (q != r or admits(si, r, kv, paged, pr, out,
                                                                                  si[q, QH], resv, ku, kg)))):
        si[r, LAZY] = 0
        return -1.0
    dur = overhead + interp(dc_tab, b, dc_x0, dc_h, step_context(si, r, b, cs))
    si[r, DTOK] += b
    if paged:
        si[r, KV] += b * kg
    busy_s[r] += dur
    return go_lazy(si, r, t + dur, lend, lbusy, hk, overhead, dc_tab, dc_x0, dc_h, paged, kv, cs, kg)
