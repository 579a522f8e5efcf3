"""Cost formulas of aonkit.model against hand-computed FLOPs and bytes (shapes as the profiler records them)."""

from __future__ import annotations

import pytest

from aonkit.model import OpInputs, is_modelled, op_cost
from aonkit.model.conv import conv_output_size
from aonkit.model.matmul import causal_pairs
from aonkit.model.shapes import parse_concrete

F32, BF16, F16 = "float", "c10::BFloat16", "c10::Half"


def cost(name: str, dims: list, types: list, concrete: list | None = None, strides: list | None = None):
    c = op_cost(name, OpInputs(dims, types, concrete or [], strides or []))
    assert c is not None, name
    return c


def test_parse_concrete() -> None:
    assert parse_concrete("[1, 2]") == [1, 2]
    assert parse_concrete("[]") == []
    assert parse_concrete("[False, True, True]") == [False, True, True]
    assert parse_concrete("True") is True and parse_concrete("") is None
    assert parse_concrete("0.") == 0.0 and parse_concrete("-1") == -1 and parse_concrete("same") == "same"


# --- matrix products: flops = 2*b*M*N*K, bytes = A + B + bias + C ----------------------------------------


def test_mm_and_addmm() -> None:
    c = cost("aten::mm", [[3, 4], [4, 5]], [F32, F32])
    assert (c.flops, c.bytes, c.dtype, c.kind) == (2 * 3 * 4 * 5, (12 + 20 + 15) * 4, "fp32", "gemm")
    types = [BF16, BF16, BF16, "Scalar", "Scalar"]
    c = cost("aten::addmm", [[5], [3, 4], [4, 5], [], []], types, ["", "", "", "1", "1"])
    assert (c.flops, c.bytes, c.dtype) == (120, (5 + 12 + 20 + 15) * 2, "bf16")
    # a bias expanded to (3, 5) with stride 0 is read once: 5 elements
    c = cost("aten::addmm", [[3, 5], [3, 4], [4, 5]], [F32] * 3, strides=[[0, 1], [4, 1], [5, 1]])
    assert c.bytes == (5 + 12 + 20 + 15) * 4


def test_bmm_baddbmm_matmul_broadcast_and_vectors() -> None:
    c = cost("aten::bmm", [[2, 3, 4], [2, 4, 5]], [F16, F16])
    assert (c.flops, c.bytes) == (2 * 2 * 3 * 4 * 5, (24 + 40 + 30) * 2)
    c = cost("aten::baddbmm", [[2, 3, 5], [2, 3, 4], [2, 4, 5], [], []], [F16, F16, F16, "Scalar", "Scalar"])
    assert (c.flops, c.bytes) == (240, (30 + 24 + 40 + 30) * 2)
    c = cost("aten::matmul", [[7, 3, 4], [4, 5]], [F32, F32])  # batch 7 broadcast against a matrix
    assert (c.flops, c.bytes) == (2 * 7 * 3 * 4 * 5, (84 + 20 + 105) * 4)
    c = cost("aten::matmul", [[2, 1, 3, 4], [5, 4, 6]], [F32, F32])  # batch dims (2, 1) x (5,) -> (2, 5)
    assert c.flops == 2 * 10 * 3 * 4 * 6 and c.bytes == (24 + 120 + 10 * 18) * 4
    c = cost("aten::matmul", [[4], [4, 5]], [F32, F32])  # vector @ matrix -> (5,)
    assert (c.flops, c.bytes) == (2 * 4 * 5, (4 + 20 + 5) * 4)
    assert op_cost("aten::mm", OpInputs([[3, 4], [5, 6]], [F32, F32])) is None  # inner dims differ


def test_linear_and_scaled_mm() -> None:
    # x (2, 3, 4) @ W(5, 4).T + b(5): M = 6, K = 4, N = 5
    c = cost("aten::linear", [[2, 3, 4], [5, 4], [5]], [F32, F32, F32])
    assert (c.flops, c.bytes) == (2 * 6 * 4 * 5, (24 + 20 + 5 + 30) * 4)
    c = cost("aten::linear", [[6, 4], [5, 4], []], [F32, F32, ""])  # no bias
    assert c.bytes == (24 + 20 + 30) * 4
    # fp8 (16, 32) @ (32, 8) with two fp32 scalar scales, bf16 output (ScalarType 15)
    dims = [[16, 32], [32, 8], [], [], [], [], [], []]
    types = ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F32, F32, "", "", "Scalar", "Scalar"]
    c = cost("aten::_scaled_mm", dims, types, ["", "", "", "", "", "", "15", "False"])
    assert (c.flops, c.bytes, c.dtype) == (2 * 16 * 32 * 8, 512 + 256 + 4 + 4 + 16 * 8 * 2, "fp8")


# --- convolutions ------------------------------------------------------------------------------------------


def test_conv_output_size() -> None:
    assert conv_output_size(10, 3, stride=2, padding=1, dilation=1) == 5  # (10 + 2 - 2 - 1) // 2 + 1
    assert conv_output_size(12, 5, stride=1, padding=2, dilation=2) == 8  # (12 + 4 - 8 - 1) // 1 + 1
    assert conv_output_size(3, 2, stride=2, transposed=True) == 6  # (3 - 1) * 2 + 1 + 0 + 1
    assert conv_output_size(3, 3, stride=2, padding=1, transposed=True, output_padding=1) == 6


def test_conv2d_grouped_strided_dilated() -> None:
    # x (2, 6, 10, 12), w (4, 3, 3, 5), groups 2, stride (2, 1), padding (1, 2), dilation (1, 2) -> out (2, 4, 5, 8)
    dims = [[2, 6, 10, 12], [4, 3, 3, 5], [4], [], [], [], []]
    types = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    c = cost("aten::conv2d", dims, types, ["", "", "", "[2, 1]", "[1, 2]", "[1, 2]", "2"])
    # 2 * numel(out) * Cin/g * kh * kw = 2 * 320 * 3 * 3 * 5 (the PyTorch profiler reports 28800 too)
    assert c.flops == 28800 and c.kind == "conv"
    assert c.bytes == (1440 + 180 + 4 + 320) * 4


def test_conv_variants_argument_orders() -> None:
    # cudnn_convolution(self, weight, padding, stride, ...): x (1, 2, 7, 7), w (3, 2, 3, 3), stride 2 -> 3 x 3
    dims = [[1, 2, 7, 7], [3, 2, 3, 3], [], [], [], [], [], [], []]
    c = cost("aten::cudnn_convolution", dims, [F16, F16] + ["ScalarList"] * 3 + ["Scalar"] * 4,
             ["", "", "[0, 0]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])  # fmt: skip
    assert c.flops == 2 * (3 * 3 * 3) * (2 * 3 * 3) and c.bytes == (98 + 54 + 27) * 2
    # conv1d with padding="same": output length = input length
    c = cost("aten::conv1d", [[1, 4, 9], [2, 4, 3], [], [], [], [], []], [F32, F32, "", "", "", "", ""],
             ["", "", "", "[1]", "same", "[1]", "1"])  # fmt: skip
    assert c.flops == 2 * (2 * 9) * (4 * 3)
    # transposed: x (1, 4, 3, 3), w (4, 2, 2, 2), stride 2 -> out (1, 2, 6, 6); each input element does 2*2*2 MACs
    dims = [[1, 4, 3, 3], [4, 2, 2, 2], [], [], [], [], [], [], []]
    c = cost("aten::convolution", dims, [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
             ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"])  # fmt: skip
    assert c.flops == 2 * 36 * 8 and c.bytes == (36 + 32 + 72) * 4
    # 2021 traces record no Concrete Inputs: a forward conv's output size is unknown
    assert op_cost("aten::cudnn_convolution", OpInputs(dims[:2] + [[]] * 7, [F32, F32] + ["Int"] * 7)) is None


def test_convolution_backward() -> None:
    # grad_out (2, 6, 16), input (2, 4, 20), weight (6, 4, 5); forward F = 2 * 192 * 20 = 7680
    dims = [[2, 6, 16], [2, 4, 20], [6, 4, 5]] + [[]] * 8
    types = [F32] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    conc = ["", "", "", "[6]", "[1]", "[0]", "[1]", "False", "[0]", "1"]
    c = cost("aten::convolution_backward", dims, types, [*conc, "[True, True, False]"])
    assert c.flops == 2 * 7680
    assert c.bytes == 768 + 480 + 640 + 640 + 480  # read grad_out, w, x; write grad_input, grad_weight
    c = cost("aten::convolution_backward", dims, types, [*conc, "[False, True, True]"])
    assert c.flops == 7680 + 192  # grad_weight + grad_bias (one add per grad_out element)
    assert c.bytes == 768 + 640 + 480 + 6 * 4
    # 2021 cudnn_convolution_backward(self, grad_output, weight, ...): no output_mask recorded -> input and weight
    dims = [[2, 4, 20], [2, 6, 16], [6, 4, 5]] + [[]] * 8
    c = cost("aten::cudnn_convolution_backward", dims, [F32] * 3 + ["Int"] * 8)
    assert c.flops == 2 * 7680


# --- attention ---------------------------------------------------------------------------------------------


def test_causal_pairs() -> None:
    assert causal_pairs(4, 4) == 10  # 1 + 2 + 3 + 4
    assert causal_pairs(3, 5) == 6  # rows keep 1, 2, 3
    assert causal_pairs(5, 3) == 12  # rows keep 1, 2, 3, 3, 3


def _sdpa(q: list, k: list, v: list, causal: str) -> tuple:
    return ([q, k, v, [], [], [], [], []], [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar"],
            ["", "", "", "", "0.", causal, "", "False"])  # fmt: skip


def test_sdpa_forward_causal_and_gqa() -> None:
    q = [2, 4, 8, 16]  # h = 8 batch-heads, Lq = Lk = 8, D = 16
    c = cost("aten::scaled_dot_product_attention", *_sdpa(q, q, q, "False"))
    assert c.flops == 2 * 8 * 64 * (16 + 16) and c.bytes == 4 * 1024 * 2 and c.kind == "attention"
    c = cost("aten::scaled_dot_product_attention", *_sdpa(q, q, q, "True"))
    assert c.flops == 2 * 8 * 36 * 32  # 36 = causal_pairs(8, 8)
    kv = [2, 2, 8, 16]  # grouped-query: 2 kv heads; work follows q's 4 heads
    c = cost("aten::scaled_dot_product_attention", *_sdpa(q, kv, kv, "False"))
    assert c.flops == 2 * 8 * 64 * 32 and c.bytes == (1024 + 512 + 512 + 1024) * 2
    # flash variant: (query, key, value, dropout_p, is_causal, return_debug_mask, scale)
    c = cost("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [BF16] * 3 + ["Scalar"] * 4,
             ["", "", "", "0.", "True", "False", ""])  # fmt: skip
    assert c.flops == 2 * 8 * 36 * 32


def test_sdpa_backward() -> None:
    q, lse = [2, 4, 8, 16], [2, 4, 8]
    dims = [q, q, q, q, q, lse, [], [], [], []]
    types = [F32] * 6 + ["Scalar", "Scalar", "", ""]
    c = cost("aten::_scaled_dot_product_flash_attention_for_cpu_backward", dims, types,
             ["", "", "", "", "", "", "0.", "False", "", ""])  # fmt: skip
    assert c.flops == 2 * 8 * 64 * (3 * 16 + 2 * 16)  # 2.5 x the forward's 2 * 8 * 64 * 32
    assert c.bytes == (2 * 3 * 1024 + 2 * 1024) * 4  # q, k, v read and their grads written; grad_out, out read
    c = cost("aten::_scaled_dot_product_flash_attention_for_cpu_backward", dims, types,
             ["", "", "", "", "", "", "0.", "True", "", ""])  # fmt: skip
    assert c.flops == 2 * 8 * 36 * 80


# --- elementwise, reductions, norms ------------------------------------------------------------------------


def test_elementwise_broadcast_inplace_and_scalars() -> None:
    c = cost("aten::add", [[4, 1], [1, 3], []], [F32, F32, "Scalar"])
    assert (c.flops, c.bytes, c.kind) == (12, (4 + 3 + 12) * 4, "elementwise")
    c = cost("aten::mul", [[2, 3], []], [F16, "double"])  # a Python float arrives as a 0-d double tensor
    assert (c.flops, c.bytes, c.dtype) == (6, 12 + 8 + 12, "fp16")
    c = cost("aten::relu_", [[2, 3]], [BF16])  # in place: read and write self
    assert (c.flops, c.bytes) == (6, 24)
    c = cost("aten::addcmul_", [[2, 2], [2, 2], [2, 2], []], [F32, F32, F32, "Scalar"])
    assert (c.flops, c.bytes) == (3 * 4, 4 * 16)
    assert is_modelled("aten::gelu") and is_modelled("aten::add_") and not is_modelled("aten::view")


def test_copies() -> None:
    c = cost("aten::copy_", [[10], [10], []], [BF16, F32, "Scalar"])  # cast fp32 -> bf16: src read, self written
    assert (c.flops, c.bytes, c.kind, c.dtype) == (0, 40 + 20, "copy", "fp32")
    c = cost("aten::copy_", [[32, 128], [32, 128], []], [F32, F32, ""], strides=[[128, 1], [0, 1], []])
    assert c.bytes == (128 + 4096) * 4  # an expanded source is read once
    assert cost("aten::fill_", [[10], []], [F32, "Scalar"]).bytes == 40
    assert cost("aten::zero_", [[3, 3]], [F16]).bytes == 18
    assert cost("aten::clone", [[3, 3], []], [F16, ""]).bytes == 36


def test_reductions_and_softmax() -> None:
    c = cost("aten::sum", [[4, 6], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[0]", "True", ""])
    assert (c.flops, c.bytes, c.kind) == (24, (24 + 6) * 4, "reduction")
    c = cost("aten::sum", [[4, 6], []], [F32, ""], ["", ""])  # sum(self, dtype): everything
    assert c.bytes == (24 + 1) * 4
    c = cost("aten::mean", [[4, 6], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[-1]", "False", ""])
    assert c.bytes == (24 + 4) * 4
    c = cost("aten::sum", [[4, 6], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[]", "False", ""])
    assert c.bytes == (24 + 1) * 4  # an empty dim list reduces all
    c = cost("aten::linalg_vector_norm", [[4, 6], [], [], [], []], [F32, "Scalar", "ScalarList", "Scalar", ""],
             ["", "2", "[1]", "False", ""])  # fmt: skip
    assert (c.flops, c.bytes) == (48, (24 + 4) * 4)
    c = cost("aten::_softmax", [[4, 6], [], []], [BF16, "Scalar", "Scalar"], ["", "-1", "False"])
    assert (c.flops, c.bytes) == (5 * 24, 2 * 24 * 2)


def test_norms() -> None:
    c = cost("aten::layer_norm", [[4, 8], [], [8], [8], [], []], [F32, "ScalarList", F32, F32, "Scalar", "Scalar"])
    assert (c.flops, c.bytes, c.kind) == (7 * 32, (32 + 8 + 8 + 32) * 4, "norm")
    c = cost("aten::rms_norm", [[4, 8], [], [], []], [F32, "ScalarList", "", ""])
    assert (c.flops, c.bytes) == (3 * 32, 64 * 4)
    dims = [[2, 3, 4, 4], [3], [3], [3], [3], [], [], [], []]
    c = cost("aten::batch_norm", dims, [BF16] * 5 + ["Scalar"] * 4)
    assert (c.flops, c.bytes) == (7 * 96, (96 + 4 * 3 + 96) * 2)


def test_unknown_and_malformed() -> None:
    assert op_cost("aten::view", OpInputs([[2, 3]], [F32])) is None
    assert op_cost("aten::mm", OpInputs([[], []], ["", ""])) is None
    assert op_cost("aten::scaled_dot_product_attention", OpInputs([[4], [4], [4]], [F32] * 3)) is None
    with pytest.raises(AssertionError):
        cost("aten::linear", [[2]], [F32])
