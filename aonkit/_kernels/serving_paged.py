"""Paged KV cache in the serving simulation (:mod:`.serving`): blocks allocated as contexts grow, and preemption.

With ``paged`` a replica's KV cache of ``kv`` tokens holds what its sequences have computed, as vLLM's block
manager does with blocks of one token: a request admitted holds its prompt (or, recomputed, its prompt and the
tokens it had generated) plus one slot for its next token, and each decode step it takes part in adds one. When a
decode step would not fit, the latest-admitted running sequence is preempted (vLLM's recompute mode): its cache is
freed and it goes back to the front of its queue, to be prefilled again, prompt and generated tokens, when it is
admitted next; its first token and the tokens it had stay emitted. The sequences admitted first are never
preempted: the oldest alone always fits (its prompt plus output is at most ``kv``, or it was refused). A request
is admitted only with room for its context, its next slot, and one more token for each sequence already running
(vLLM keeps a watermark of free blocks for the same reason): a sequence just preempted cannot be taken back at
the next step only to be preempted again.

Per request the kernel keeps ``ctx0`` (tokens its next prefill computes: the prompt, then prompt plus generated),
``left`` (tokens still to produce) and ``adm`` (an admission stamp: the latest is the one preempted). A sequence
finishing frees ``ctx0 + left`` tokens, in either mode (:func:`.serving_decode.end_decode_step`). Loops index
with ``range(n)`` from 0.

With speculative decoding (session 55) a decode step is an iteration, ``left`` counts iterations, and a sequence's
cache grows by the run's mean tokens an iteration, a fraction: the cache is counted in units, ``ku`` a token
(``kv`` tokens are ``kv * ku`` units), and each decode step adds ``kg`` (that mean in units) to each sequence's. A
sequence holds ``(ctx0 + 1) * ku`` once admitted and ``kg`` more each step; a preempted one made a token with its
prefill and ``kg / ku`` with each step (rounded down, :func:`preempt`), which its next prefill computes again (at
most ``(left - 1) * kg / ku`` in all, :func:`longest`). Plain decoding is ``ku = kg = 1``: every count above is a
token count.

With one central queue a preempted request joins it between arrivals, and any replica with room may take it at its
next step end. So there the event loop (:mod:`.serving`) lets a replica run ahead only up to the earliest instant
another may preempt (:func:`horizon`); at an instant at which a replica starting its step may preempt (no room in
its cache for its batch's next tokens) it wakes every lazy replica with room and lets none go lazy (one before it in
replica order would miss the request); and a lazy replica is never lazy past its event (another starting its step
at that instant may preempt). Between such instants the queue grows only at arrivals, and the rules of the central
queue hold; :func:`.serving_wake.wake_earliest` counts as sure to take a request only replicas with room for the
longest context a request may bring once their cache has grown to their event.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_leaf, njit_leaf_inline
from .serving_decode import BUSY, DSTEP, HN, KV, PN, PRE, QH, QL, QT, RUN, SJ, SP
from .serving_heap import sift_down


@njit_leaf_inline
def refused(p, o, kv, resv, paged, kvu, ku, kg):
    """Whether a request of ``p`` prompt tokens and ``o`` outputs (tokens; speculative, 1 + iterations) never fits.

    Reserving: its prompt and output, or its prompt and ``resv`` (when not 0), exceed ``kv`` tokens. Paged: what
    it holds once its last step has started, its prompt and a slot and ``kg`` units for each of its ``o - 1``
    decode steps, exceeds ``kvu`` units (or its prompt and ``resv`` exceed ``kv``): with ``ku = kg = 1`` its
    prompt and output exceed ``kv``, as reserving.
    """
    if paged:
        return (p + 1) * ku + (o - 1) * kg > kvu or (resv > 0 and p + resv > kv)
    return p + (o if resv == 0 else resv) > kv


@njit_leaf_inline
def longest(p, o, ku, kg):
    """Units a request of ``p`` prompt tokens and ``o`` outputs may need to be admitted: the most its recompute holds.

    A preempted request computes its prompt again with the tokens it made: 1 for each prefill and ``kg / ku`` for
    each decode step (rounded down, :func:`preempt`), at most ``(o - 1) * kg / ku`` in all as it has at least one
    output left; then a slot. ``ku = kg = 1``: its prompt and output.
    """
    return (p + 1 + ((o - 1) * kg) // ku) * ku


@njit_leaf
def mark_fits(fits, pr, out, kv, resv, paged, kvu, ku, kg, central):
    """Set ``fits`` for each request a replica's cache can hold to its end; return what the longest of them needs.

    The others are :func:`refused`. The need (for one central queue, ``central``; else 0): :func:`longest` paged,
    its prompt and output (or ``resv``) reserving.
    """
    big = 0
    for j in range(pr.shape[0]):
        fits[j] = not refused(pr[j], out[j], kv, resv, paged, kvu, ku, kg)
        if fits[j] and central:
            big = max(big, longest(pr[j], out[j], ku, kg) if paged else pr[j] + (out[j] if resv == 0 else resv))
    return big


@njit_leaf
def preempt(si, r, q, hk, hv, pbuf, rem, ctx0, left, adm, nxt, npre, ku=1, kg=1):
    """Preempt replica ``r``'s latest-admitted running sequence (recompute) to the front of queue ``q``; its index.

    Called as a step starts. A decoding sequence has generated one token at its prefill and one per decode step
    since (``DSTEP`` less the step count its prefill ended at, recovered from its heap key); a sequence still in
    its prompt (chunked prefill) has generated none and starts its prompt again. Counted in ``npre`` (per request)
    and the replica's ``PRE``. ``ku``, ``kg``: the cache's units a token and a sequence's growth a decode step (1
    and 1; speculative, the module's docstring): the tokens its steps made, ``kg / ku`` each, rounded down.
    """
    best, at, decoding = -1, -1, False
    for k in range(si[r, HN]):
        if best < 0 or adm[hv[r, k]] > adm[best]:
            best, at, decoding = hv[r, k], k, True
    for k in range(si[r, PN]):
        if best < 0 or adm[pbuf[r, k]] > adm[best]:
            best, at, decoding = pbuf[r, k], k, False
    j = best
    if decoding:
        d_adm = hk[r, at] - left[j] + 1  # the decode-step count when its prefill ended
        s = si[r, DSTEP] - d_adm  # decode steps taken (after the token of its prefill)
        n = si[r, HN] - 1
        hk[r, at], hv[r, at] = hk[r, n], hv[r, n]
        si[r, HN] = n
        for k in range(n // 2 - 1, -1, -1):
            sift_down(hk, hv, r, k, n)
        si[r, SP] -= ctx0[j]
        si[r, SJ] -= d_adm
        si[r, KV] -= (ctx0[j] + 1) * ku + s * kg
        ctx0[j] += 1 + (s * kg) // ku
        left[j] -= 1 + s
    else:
        for k in range(at, si[r, PN] - 1):
            pbuf[r, k] = pbuf[r, k + 1]
        si[r, PN] -= 1
        si[r, KV] -= (ctx0[j] + 1) * ku
    rem[j] = ctx0[j]
    si[r, RUN] -= 1
    si[r, PRE] += 1
    npre[j] += 1
    if si[q, QL] == 0:
        si[q, QT] = j
    else:
        nxt[j] = si[q, QH]
    si[q, QH] = j
    si[q, QL] += 1
    return j


@njit_leaf
def horizon(si, r, hp):
    """With one central queue, the earliest instant at which a replica other than ``r`` may preempt.

    A request joins the central queue at an arrival or when a replica preempts it, as a step starts; until one does,
    replica ``r`` (decode-only, the queue empty) may run its steps ahead as the event loop would. A replica whose
    step ends at the instant and has not started its next may preempt then: the caller stops the run there without
    calling this (one is left in its candidates). Any other may not before ``hp``: set as its step starts, its next
    step end plus ``dmin`` (a lower bound on a step's duration) for each further step its cache has room for,
    growing by a token a running sequence each; for a lazy one, that or its event (before which its cache is not
    full), whichever is later. That holds while the queue stays empty, as nothing is admitted then: for a replica
    woken to take waiting requests too (they were taken, as the queue is empty), its steps those of the lazy one it
    was. Idle replicas never preempt. The event loop keeps a lower bound of these instants (``hmin``: lowered as each
    is set) and calls this only when that bound comes before the next arrival (it then becomes the result).
    """
    h = np.inf
    for b in range(si.shape[0] - 1):
        if b != r and si[b, BUSY] == 1:  # (idle, or, the caller's to check, ending its step at the instant: not)
            h = min(h, hp[b])
    return h
