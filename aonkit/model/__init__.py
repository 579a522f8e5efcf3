"""Performance models: device ceilings, per-op FLOPs and bytes, the roofline.

Pure functions and tables, no trace access: :mod:`aonkit.analysis.roofline`
applies them to traces. :mod:`aonkit.model.llm` models whole transformers
(parameters, FLOPs, memory, training step time, inference latency).
"""

from __future__ import annotations

from .calibration import Calibration, calibrate, calibration_table, compare_forward, transformer_from_trace
from .hardware import PEAK_KEYS, DeviceSpec, device_spec, devices
from .llm import (
    MLA,
    Parallelism,
    TrainingStepTime,
    TransformerConfig,
    activation_memory,
    decode_time,
    prefill_time,
    training_flops,
    training_memory,
    training_step,
)
from .ops import is_modelled, op_cost
from .queueing import (
    QueueMetrics,
    erlang_c,
    ggc,
    md1,
    mg1,
    mm1,
    mm1_wait_quantile,
    mmc,
    mmc_servers_needed,
    mmc_wait_quantile,
)
from .serving import ServingResult, serving_summary, simulate_serving
from .serving_analysis import ReplicaPlan, goodput, replicas_needed, saturation_knee, serving_sweep
from .serving_disagg import Pool, PoolPlan, disaggregated_sweep, pools_needed, simulate_disaggregated
from .serving_fit import StepFit, fit_step_time
from .serving_inputs import ArrivalProcess, Lengths, StepTime
from .serving_spec import Speculation, speculative_memory, speculative_step_time
from .shapes import OpCost, OpInputs

__all__ = ["PEAK_KEYS", "DeviceSpec", "OpCost", "OpInputs", "device_spec", "devices", "is_modelled", "op_cost"]
__all__ += [  # the serving queue model (docs/serving-model.md)
    "ArrivalProcess", "Lengths", "Pool", "PoolPlan", "QueueMetrics", "ReplicaPlan", "ServingResult", "StepFit",
    "StepTime", "disaggregated_sweep", "erlang_c", "fit_step_time", "ggc", "goodput", "md1", "mg1", "mm1",
    "mm1_wait_quantile", "mmc", "mmc_servers_needed", "mmc_wait_quantile", "pools_needed", "replicas_needed",
    "saturation_knee", "serving_summary", "serving_sweep", "simulate_disaggregated", "simulate_serving",
    "Speculation", "speculative_memory", "speculative_step_time",
]
__all__ += [  # the analytic LLM model (docs/llm-model.md; everything else in aonkit.model.llm)
    "MLA", "Parallelism", "TrainingStepTime", "TransformerConfig", "activation_memory", "decode_time", "prefill_time",
    "training_flops", "training_memory", "training_step",
]  # fmt: skip
__all__ += [  # calibration of the efficiency factors from traces (docs/calibration.md)
    "Calibration", "calibrate", "calibration_table", "compare_forward", "transformer_from_trace",
]  # fmt: skip
