"""NVIDIA datasheet ceilings (dense, no 2:4 sparsity), one source cited per number.

Datasheets since Ampere print Tensor Core figures "with sparsity" (marked ``*``);
the dense figures used here are half of those, as the datasheets' footnotes
state. Peaks are at boost clock; sustained clocks under load are lower.
"""

from __future__ import annotations

from .hardware import DeviceSpec, datasheet_spec

_A100 = "NVIDIA A100 Tensor Core GPU datasheet (r4): https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"  # noqa: E501
_AMPERE = "NVIDIA A100 Tensor Core GPU Architecture whitepaper, Table 1 (A100 SXM4 40 GB: 1555 GB/s): https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf"  # noqa: E501
_H100 = "NVIDIA H100 Tensor Core GPU datasheet: https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"  # noqa: E501
_H200 = "NVIDIA H200 specifications: https://www.nvidia.com/en-us/data-center/h200/"
_B200 = (
    "NVIDIA GB200 NVL72 specifications, HGX B200 per-GPU column: https://www.nvidia.com/en-us/data-center/gb200-nvl72/"  # noqa: E501
)
_L4 = "NVIDIA L4 specifications: https://www.nvidia.com/en-us/data-center/l4/"
_A10 = "NVIDIA A10 specifications: https://www.nvidia.com/en-us/data-center/products/a10-gpu/"
_V100 = "NVIDIA Tesla V100 datasheet (r5): https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"  # noqa: E501
_P100 = "NVIDIA Tesla P100 datasheet: https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-datasheet.pdf"
_P100_PCIE = (
    "NVIDIA Tesla P100 PCIe datasheet: https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-PCIe-datasheet.pdf"  # noqa: E501
)
_GP100 = "NVIDIA Quadro GP100 data sheet (nvidia.com, Quadro GP100 product documents)"

_HALF = "Tensor Core peaks are half the datasheet's 'with sparsity' figures."
_A100_PEAKS = {"fp64": 9.7, "fp64_matrix": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}
_HOPPER_PEAKS = {"fp64": 34, "fp64_matrix": 67, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5,
                 "fp8": 1979, "int8": 1979}  # fmt: skip
_VOLTA_NOTE = "fp16 is the Tensor Core mixed-precision peak; 16 GB and 32 GB boards share the numbers."

NVIDIA: tuple[DeviceSpec, ...] = (
    datasheet_spec("A100 40GB", _A100, _A100_PEAKS, 1555, 40, 108, r"a100|pg509-200",
                   "SXM4 and PCIe 40 GB boards; peaks as the 80 GB datasheet (same GA100 clocks).",
                   memory_bandwidth=_AMPERE, memory_bytes=_AMPERE),
    datasheet_spec("A100 SXM4 80GB", _A100, _A100_PEAKS, 2039, 80, 108, r"a100(?!.*pcie)|pg509-210"),
    datasheet_spec("A100 PCIe 80GB", _A100, _A100_PEAKS, 1935, 80, 108, r"a100.*pcie"),
    datasheet_spec("H100 SXM", _H100, _HOPPER_PEAKS, 3350, 80, 132, r"h100(?!.*(pcie|nvl))",
                   _HALF + " A bare 'NVIDIA H100' name is taken as SXM."),
    datasheet_spec("H100 PCIe", _H100,
                   {"fp64": 26, "fp64_matrix": 51, "fp32": 51, "tf32": 378, "bf16": 756.5, "fp16": 756.5,
                    "fp8": 1513, "int8": 1513}, 2000, 80, 114, r"h100.*pcie", _HALF),
    datasheet_spec("H200 SXM", _H200, _HOPPER_PEAKS, 4800, 141, 132, r"h200(?!.*nvl)", _HALF),
    datasheet_spec("B200", _B200,
                   {"fp64": 37, "fp64_matrix": 37, "fp32": 75, "tf32": 1100, "bf16": 2250, "fp16": 2250,
                    "fp8": 4500, "int8": 4500}, 7700, 180, 148, r"(?<![a-z])b200", _HALF + " HGX B200 (1000 W)."),
    datasheet_spec("L4", _L4, {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5, "int8": 242.5},
                   300, 24, 58, r"(?<![a-z0-9])l4(?![a-z0-9])", _HALF + " No FP64 figure published."),
    datasheet_spec("A10", _A10, {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125, "int8": 250},
                   600, 24, 72, r"(?<![a-z0-9])a10(?![a-z0-9])", "Dense figures as printed (sparse ones carry *)."),
    datasheet_spec("V100 SXM2", _V100, {"fp64": 7.8, "fp32": 15.7, "fp16": 125}, 900, 32, 80,
                   r"v100(?!s)(?!.*pcie)", _VOLTA_NOTE + " DGX Station (DGXS) V100s are matched here."),
    datasheet_spec("V100 PCIe", _V100, {"fp64": 7, "fp32": 14, "fp16": 112}, 900, 32, 80, r"v100(?!s).*pcie",
                   _VOLTA_NOTE),
    datasheet_spec("V100S PCIe", _V100, {"fp64": 8.2, "fp32": 16.4, "fp16": 130}, 1134, 32, 80, r"v100s",
                   _VOLTA_NOTE),
    datasheet_spec("P100 SXM2", _P100, {"fp64": 5.3, "fp32": 10.6, "fp16": 21.2}, 732, 16, 56, r"p100(?!.*pcie)",
                   "No Tensor Cores: fp16 is the packed-half vector peak."),
    datasheet_spec("P100 PCIe 16GB", _P100_PCIE, {"fp64": 4.7, "fp32": 9.3, "fp16": 18.7}, 732, 16, 56,
                   r"p100.*pcie"),
    datasheet_spec("P100 PCIe 12GB", _P100_PCIE, {"fp64": 4.7, "fp32": 9.3, "fp16": 18.7}, 549, 12, 56,
                   r"p100.*pcie"),
    datasheet_spec("Quadro GP100", _GP100, {"fp64": 5.2, "fp32": 10.3, "fp16": 20.7}, 717, 16, 56, r"gp100",
                   "No Tensor Cores: fp16 is the packed-half vector peak."),
)  # fmt: skip
"""NVIDIA devices, most specific first within a family."""
