"""AMD Instinct datasheet ceilings (dense), one source cited per number.

ROCm shows each graphics compute die (GCD) of an MI250X or MI250 as its own
device with 64 GB, so those entries hold one GCD: half the module's figures.
"""

from __future__ import annotations

from .hardware import DeviceSpec, datasheet_spec

_MI300X = "AMD Instinct MI300X data sheet: https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf"  # noqa: E501
_MI250X = "AMD Instinct MI250X specifications: https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"  # noqa: E501
_MI250 = "AMD Instinct MI250 specifications: https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"
_MI210 = "AMD Instinct MI210 specifications: https://www.amd.com/en/products/accelerators/instinct/mi200/mi210.html"
_GCD = "One GCD: half the module's datasheet figures (module: {})."

AMD: tuple[DeviceSpec, ...] = (
    datasheet_spec("MI300X", _MI300X,
                   {"fp64": 81.7, "fp64_matrix": 163.4, "fp32": 163.4, "fp32_matrix": 163.4, "tf32": 653.7,
                    "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9}, 5300, 192, 304, r"mi300x",
                   "Matrix peaks without sparsity."),
    datasheet_spec("MI250X GCD", _MI250X,
                   {"fp64": 23.95, "fp64_matrix": 47.85, "fp32": 23.95, "fp32_matrix": 47.85, "bf16": 191.5,
                    "fp16": 191.5, "int8": 191.5}, 1600, 64, 110, r"mi250x",
                   _GCD.format("FP64/FP32 vector 47.9, matrix 95.7, FP16/BF16/INT8 383 TFLOPS, 128 GB, 3.2 TB/s")),
    datasheet_spec("MI250 GCD", _MI250,
                   {"fp64": 22.65, "fp64_matrix": 45.25, "fp32": 22.65, "fp32_matrix": 45.25, "bf16": 181.05,
                    "fp16": 181.05, "int8": 181.05}, 1600, 64, 104, r"mi250(?!x)|mi250x/mi250",
                   _GCD.format("FP64/FP32 vector 45.3, matrix 90.5, FP16/BF16/INT8 362.1 TFLOPS, 128 GB, 3.2 TB/s")),
    datasheet_spec("MI210", _MI210,
                   {"fp64": 22.6, "fp64_matrix": 45.3, "fp32": 22.6, "fp32_matrix": 45.3, "bf16": 181.0,
                    "fp16": 181.0, "int8": 181.0}, 1600, 64, 104, r"mi210"),
)  # fmt: skip
"""AMD devices. ``"AMD Instinct MI250X/MI250"`` (one ROCm name for both) is told apart by CU count."""
