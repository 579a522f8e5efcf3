"""Performance models: device ceilings, per-op FLOPs and bytes, the roofline.

Pure functions and tables, no trace access: :mod:`aonkit.analysis.roofline`
applies them to traces.
"""

from __future__ import annotations

from .hardware import PEAK_KEYS, DeviceSpec, device_spec, devices
from .ops import is_modelled, op_cost
from .shapes import OpCost, OpInputs

__all__ = ["PEAK_KEYS", "DeviceSpec", "OpCost", "OpInputs", "device_spec", "devices", "is_modelled", "op_cost"]
