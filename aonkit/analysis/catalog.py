"""The index of what aonkit can answer: one entry per public analysis.

Each :class:`Entry` names the question, the function, what it takes (a
``trace``, a ``job`` of ranks, or HTA ``frames``) and its counterpart in
Holistic Trace Analysis or TraceLens. ``docs/analyses.md`` is generated from
this list (``tools/analyses_doc.py``; a test keeps it current), the naming test
checks every entry's output, and ``tools/analysis_digest.py`` runs them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One public analysis.

    Attributes
    ----------
    question : str
        What it answers, in the user's words.
    function : str
        ``module.name`` under :mod:`aonkit.analysis`.
    takes : str
        ``"trace"``, ``"job"`` (ranks: a TraceSet) or ``"frames"`` (HTA frames of
        :func:`aonkit.analysis.hta_compat.hta_frames`).
    counterpart : str
        The HTA 0.5 / TraceLens function that answers the same question, or ``""``.
    kwargs : dict
        Arguments of the catalogued call, when not the defaults.
    """

    question: str
    function: str
    takes: str = "trace"
    counterpart: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)

    def resolve(self) -> Callable[..., Any]:
        """The function itself."""
        module, name = self.function.rsplit(".", 1)
        return getattr(importlib.import_module(f"aonkit.analysis.{module}"), name)

    def run(self, subject: Any) -> Any:
        """Call it on a trace, a job or frames (as ``takes`` says) with the catalogued arguments."""
        return self.resolve()(subject, **self.kwargs)


E = Entry
ENTRIES: tuple[Entry, ...] = (
    E("Which kernels take the GPU time, by name?", "kernels.kernel_stats", counterpart="HTA get_gpu_kernel_breakdown"),
    E("Which kernel classes (GEMM, attention, comm, memory...) take the GPU time?", "kernels.kernel_stats",
      kwargs={"by": "class"}, counterpart="TraceLens get_df_gpu_timeline"),
    E("Every GPU event with its name, class, device, stream and times", "kernels.gpu_table"),
    E("How much GPU time does each CPU op launch?", "kernels.gpu_time_per_op",
      counterpart="TraceLens get_df_kernel_launchers"),
    E("How long from each launch call to its kernel's start?", "kernels.launch_stats",
      counterpart="HTA get_cuda_kernel_launch_stats"),
    E("Which launch call, CPU op, annotation and step does each GPU event come from?", "correlation.gpu_links",
      counterpart="HTA get_gpu_kernels_with_user_annotations; TraceLens Trace2Tree"),
    E("Which launch call does each GPU event come from?", "correlation.gpu_launches"),
    E("What is each CPU event's parent on its thread?", "correlation.cpu_stack", counterpart="HTA CallStackGraph"),
    E("When and why does the GPU idle, per device?", "idle.idle_summary",
      counterpart="HTA get_idle_time_breakdown"),
    E("When and why does the GPU idle, per stream?", "idle.idle_summary", kwargs={"by": "stream"}),
    E("Every idle gap, with its cause", "idle.idle_series", counterpart="HTA get_idle_time_breakdown (show_idle_"
      "interval_stats)"),
    E("How long are the launch queues of each stream?", "queues.queue_length_series",
      counterpart="HTA get_queue_length_time_series"),
    E("How long are the launch queues, summarised per stream?", "queues.queue_length_summary",
      counterpart="HTA get_queue_length_summary"),
    E("Every memcpy/memset with its bytes and bandwidth", "bandwidth.copies"),
    E("Memory bandwidth over time per copy kind", "bandwidth.memory_bandwidth_series",
      counterpart="HTA get_memory_bw_time_series"),
    E("Memory bandwidth per copy kind", "bandwidth.memory_bandwidth_summary", counterpart="HTA get_memory_bw_summary"),
    E("How much communication is exposed (not overlapped by compute)?", "collectives.exposed_communication",
      counterpart="HTA get_comm_comp_overlap; TraceLens GPUEventAnalyser exposed comm"),
    E("Every communication kernel with its collective's arguments", "collectives.comm_kernels"),
    E("How do the ranks' clocks differ?", "collectives.clock_offsets", takes="job"),
    E("Which collectives match across ranks, and how long does each rank wait?", "collectives.collectives",
      takes="job", counterpart="HTA NCCL collective analysis"),
    E("Which ranks straggle?", "collectives.stragglers", takes="job"),
    E("Which kernels take the GPU time over the whole job, and how do the ranks differ?",
      "job_stats.job_kernel_stats", takes="job"),
    E("How much GPU time does each annotation range launch?", "projection.range_projection",
      counterpart="HTA get_gpu_user_annotation_breakdown"),
    E("The annotation ranges' GPU time, summarised per name", "projection.range_projection_summary",
      takes="projection"),
    E("FLOPs and bytes of every op whose shapes are recorded", "flops.op_costs",
      counterpart="TraceLens PerfModel"),
    E("How close does each op get to the roofline?", "roofline.roofline_table",
      counterpart="TraceLens PerfModel roofline"),
    E("How close does each kernel get to the roofline?", "roofline.roofline_table", kwargs={"by": "kernel"}),
    E("Device memory peaks, and the ops that allocate most", "memory.memory_peaks",
      counterpart="HTA MemoryAnalysis"),
    E("Every allocator event", "memory.memory_events"),
    E("CUPTI range-profiler counters per launching op", "cupti.cupti_counters",
      counterpart="HTA get_cupti_counter_data_with_operators"),
    E("Each profiler step's span and GPU work", "steps.profiler_steps", counterpart="HTA get_profiler_steps"),
    E("Each forward pass of an inference engine: prefill or decode, its batch, tokens, context and time",
      "engine_passes.forward_passes"),
    E("Devices, ranks, span, counts and top kernels", "summary.summarize"),
    E("The top kernels by total time", "summary.top_kernels"),
    E("The dashboard's first tables in one pass", "overview.overview"),
    E("What should I look at first (straggler, exposed communication, GPU idle, slow steps)?", "findings.findings"),
    E("Which CPU call paths take the time, and how much GPU time does each launch (an icicle)?", "op_tree.op_tree",
      counterpart="TraceLens Trace2Tree"),
    E("What should I look at first in a job?", "findings.findings", takes="job"),
    E("One trace of all ranks on one clock", "combine.combine_ranks", takes="job"),
    E("What got faster or slower between two runs?", "diff.trace_diff", takes="pair",
      counterpart="HTA TraceDiff"),
    E("What is the critical path?", "critical_path.critical_path", counterpart="HTA critical_path_analysis"),
    E("What if a class of work got faster or slower?", "critical_path.what_if",
      kwargs={"rules": [{"scale": 0.5, "kind": "gpu"}]}),
    E("What would each step's latency and the run's step period become (a GPU running behind its host)?",
      "whatif_steps.step_times", kwargs={"rules": [{"scale": 0.5, "kind": "gpu"}]}),
    E("How would each kernel's time change on another GPU (for what_if: whatif_hardware.hardware_rules)?",
      "whatif_hardware.hardware_scales", kwargs={"target": "H200 SXM"}),
    E("What if the batch were twice as large: each kernel's factor (for what_if: whatif_batch.batch_rules)?",
      "whatif_batch.batch_scales", kwargs={"factor": 2.0}),
    E("Where does a bigger batch stop paying (step time, throughput and the GPU's share per batch size)?",
      "whatif_batch.batch_sweep", takes="job", kwargs={"factors": (0.5, 1, 2, 4), "step": 3}),
    E("Would twice the batch fit in GPU memory (each GPU's peak, projected)?", "whatif_batch_memory.batch_memory",
      kwargs={"factor": 2.0}),
    E("What if the straggler rank were faster (collectives tied across ranks)?", "critical_path.what_if",
      takes="job", kwargs={"rules": [{"scale": 0.8, "rank": 1}]}),
    E("HTA's temporal breakdown (idle, compute, non-compute)", "hta_compat.temporal_breakdown", takes="frames",
      counterpart="HTA get_temporal_breakdown"),
    E("HTA's kernel-type breakdown", "hta_compat.gpu_kernel_breakdown_type", takes="frames",
      counterpart="HTA get_gpu_kernel_breakdown"),
    E("HTA's per-kernel breakdown", "hta_compat.gpu_kernel_breakdown_kernels", takes="frames",
      counterpart="HTA get_gpu_kernel_breakdown"),
    E("HTA's communication/computation overlap", "hta_compat.comm_comp_overlap", takes="frames",
      counterpart="HTA get_comm_comp_overlap"),
    E("HTA's GPU user-annotation breakdown", "hta_compat.gpu_user_annotation_breakdown", takes="frames",
      counterpart="HTA get_gpu_user_annotation_breakdown"),
    E("HTA's idle-time breakdown", "hta_counters.idle_time_breakdown", takes="frames",
      counterpart="HTA get_idle_time_breakdown"),
    E("HTA's kernel launch statistics", "hta_counters.cuda_kernel_launch_stats", takes="frames",
      counterpart="HTA get_cuda_kernel_launch_stats"),
    E("HTA's memory bandwidth series", "hta_counters.memory_bw_series", takes="frames",
      counterpart="HTA get_memory_bw_time_series"),
    E("HTA's memory bandwidth summary", "hta_counters.memory_bw_summary", takes="frames",
      counterpart="HTA get_memory_bw_summary"),
    E("HTA's queue length series", "hta_queues.queue_length_series", takes="frames",
      counterpart="HTA get_queue_length_time_series"),
    E("HTA's queue length summary", "hta_queues.queue_length_summary", takes="frames",
      counterpart="HTA get_queue_length_summary"),
    E("HTA's time blocked on a full launch queue", "hta_queues.time_blocked_on_full_queue", takes="frames",
      counterpart="HTA get_time_spent_blocked_on_full_queue"),
)
"""Every public analysis, in the order ``docs/analyses.md`` lists them."""

HTA_NAMES_KEPT = ("hta_compat", "hta_prepare", "hta_counters", "hta_queues")
"""Modules whose tables keep HTA 0.5's column names (for CSV equality with HTA); the naming contract exempts them."""
