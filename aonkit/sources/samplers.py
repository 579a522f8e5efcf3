"""Live metric samplers, and the one path by which samples reach a trace.

A sampler samples on its own thread into a preallocated ring buffer and hands
out new samples in the long form shared with nsys ``GPU_METRICS``
(:data:`SAMPLE_COLUMNS`: ``ts_ns``, ``device``, ``metric``, ``value``;
``ts_ns`` on the ``time.time_ns()`` clock, which is the profiler traces'
epoch clock). Readers keep a cursor, so several views can read one sampler.
:class:`HostSampler` samples CPU and memory; :class:`aonkit.sources.nvml.NvmlSampler`
samples GPUs through NVML behind the same :class:`Sampler` protocol (one ring
column per (device, metric) channel).

Samples reach a :class:`~aonkit.Trace` through ``trace.samples`` only, a
table of that long form:

* a source that records samples with the trace sets it when reading (the
  nsys reader, from ``GPU_METRICS``: :mod:`aonkit.sources.nsys.metrics`);
* samples taken live beside a run are attached afterwards with
  :func:`attach_samples` (a sampler, or a table it returned), added to any
  samples the trace has.

From there the timeline draws each (metric, device) as a counter lane and
the Parquet cache saves them. :class:`aonkit.widgets.LiveMonitor` plots a
sampler's table while it runs (figures from :mod:`aonkit.views.monitor`).
"""

from __future__ import annotations

from .host_sampler import HostSampler
from .ring_sampler import CLOSE_MIN_NS, STOP_WAIT_S, RingSampler, Sampler
from .samples import HOST_DEVICE, SAMPLE_COLUMNS, attach_samples, samples_table

__all__ = ["CLOSE_MIN_NS", "HOST_DEVICE", "SAMPLE_COLUMNS", "STOP_WAIT_S", "HostSampler", "RingSampler", "Sampler",
           "attach_samples", "samples_table"]  # fmt: skip
