"""Analytic LLM model (aonkit.model.llm): parameters, FLOPs, memory, communication, step time, inference.

Published numbers are cited where used: Narayanan et al. 2021 (SC'21) Table 1 and section 5.1's training-time
estimates; Korthikanti et al. 2022 Table 2 formulas, Table 5 iteration times and the Megatron-LM README's MFU
for the same runs; Rajbhandari et al. 2020 (ZeRO) Figure 1; model cards / papers of the presets.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aonkit.model import device_spec
from aonkit.model.llm import (
    DEEPSEEK_V3,
    DGX_A100,
    GPT3_175B,
    LLAMA3_8B,
    LLAMA3_70B,
    LLAMA3_405B,
    MIXTRAL_8X7B,
    Link,
    Network,
    Parallelism,
    TransformerConfig,
    activation_memory,
    collective_time,
    decode_time,
    forward_flops,
    gpt_config,
    inference_memory,
    kv_cache_bytes,
    model_state_memory,
    prefill_time,
    preset,
    training_flops,
    training_memory,
    training_step,
)

A100 = device_spec("A100 SXM4 80GB")
H100 = device_spec("H100 SXM")
S, V = 2048, 51200

# Narayanan et al. 2021, Table 1: params (B), heads, hidden, layers, TP, PP, GPUs, batch, achieved TFLOP/s per GPU
TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]  # fmt: skip
# Korthikanti et al. 2022: heads, hidden, layers, TP, PP, global batch; Table 5 iteration time (s) with full
# recomputation and with sequence parallelism + selective recomputation; Megatron-LM README MFU (%) of the latter
KORTHIKANTI = {
    "22B": (64, 6144, 48, 8, 1, 4, 1.42, 1.10, 41.5), "175B": (96, 12288, 96, 8, 8, 64, 18.13, 13.75, 51.4),
    "530B": (128, 20480, 105, 8, 35, 280, 49.05, 37.83, 56.0), "1T": (160, 25600, 128, 8, 64, 512, 94.42, 71.49, 56.3),
}  # fmt: skip


# ---- parameters ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", TABLE1, ids=[f"{r[0]}B" for r in TABLE1])
def test_gpt_params_match_narayanan_table1(row: tuple) -> None:
    billions, a, h, n = row[:4]
    cfg = gpt_config(n, h, a)
    # the paper's P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) leaves out the final LayerNorm (2h)
    paper = 12 * n * h**2 + 13 * n * h + (V + S) * h
    assert cfg.num_params() == paper + 2 * h
    assert round(cfg.num_params() / 1e9, 1) == billions


def test_preset_params_against_published_counts() -> None:
    # Llama-3 8B by hand: embeddings 2*V*h, per layer q,o 2h^2 + k,v 2*h*1024 + MLP 3*h*f + 2 norms h, final norm
    h, f, v = 4096, 14336, 128256
    per_layer = 2 * h * h + 2 * h * 1024 + 3 * h * f + 2 * h
    assert LLAMA3_8B.num_params() == 2 * v * h + 32 * per_layer + h == 8_030_261_248  # released checkpoint's count
    assert LLAMA3_70B.num_params() == 70_553_706_496
    assert round(LLAMA3_405B.num_params() / 1e9) == 406  # "405B"
    assert round(GPT3_175B.num_params() / 1e9, 1) == 174.6  # Narayanan et al. Table 2's "174.6B" GPT-3
    # Mixtral paper: 47B parameters, 13B active (model card: 46.7B / 12.9B)
    assert round(MIXTRAL_8X7B.num_params() / 1e9, 1) == 46.7
    assert round(MIXTRAL_8X7B.num_params(active=True) / 1e9, 1) == 12.9
    # DeepSeek-V3 report: 671B total, 37B activated per token
    assert round(DEEPSEEK_V3.num_params() / 1e9) == 671
    assert 37e9 <= DEEPSEEK_V3.num_params(active=True) < 38e9
    for cfg in (GPT3_175B, LLAMA3_8B, MIXTRAL_8X7B, DEEPSEEK_V3):
        assert sum(cfg.param_breakdown().values()) == cfg.num_params()


def test_config_defaults_replace_and_tied_embeddings() -> None:
    cfg = TransformerConfig(layers=2, hidden=4096, heads=32, vocab=1000, seq=128, gated_mlp=True)
    assert cfg.ffn == 11008 and cfg.kv_heads == 32 and cfg.head_dim == 128  # 8/3 h rounded up to 256: LLaMA-1 7B
    assert TransformerConfig(layers=1, hidden=64, heads=4, vocab=10, seq=8).ffn == 256
    wider = cfg.replace(hidden=8192, heads=64)
    assert wider.ffn == 256 * math.ceil(8 * 8192 / 3 / 256) and wider.head_dim == 128  # defaults recomputed
    assert cfg.replace(ffn=1000).ffn == 1000
    tied = cfg.replace(tied_embeddings=True)
    assert cfg.num_params() - tied.num_params() == 1000 * 4096
    assert preset("llama3-70b") is LLAMA3_70B and preset("DeepSeek V3") is DEEPSEEK_V3
    with pytest.raises(KeyError, match="no preset"):
        preset("gpt-5")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kv_heads": 5}, "multiple of kv_heads"),
        ({"experts": 4, "top_k": 5}, "top_k"),
        ({"norm": "batchnorm"}, "norm must be"),
        ({"layers": 0}, "positive integers"),
        ({"hidden": 100}, "not a multiple of heads"),
        ({"moe_layers": 2}, "experts == 1"),
        ({"experts": 4, "moe_layers": 9}, "between 0 and layers"),
    ],
)
def test_config_validation_errors(kwargs: dict, message: str) -> None:
    base = {"layers": 4, "hidden": 64, "heads": 8, "vocab": 100, "seq": 16}
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{**base, **kwargs})


# ---- FLOPs ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", TABLE1, ids=[f"{r[0]}B" for r in TABLE1])
def test_training_flops_is_narayanan_equation(row: tuple) -> None:
    _, a, h, n, _, _, _, batch, _ = row
    cfg = gpt_config(n, h, a)
    paper = 96 * batch * S * n * h**2 * (1 + S / (6 * h) + V / (16 * n * h))
    assert training_flops(cfg, batch) == pytest.approx(paper, rel=1e-12)
    assert training_flops(cfg, batch, recompute=False) == pytest.approx(
        72 * batch * S * n * h**2 * (1 + S / (6 * h) + V / (12 * n * h)), rel=1e-12)  # fmt: skip
    fwd = forward_flops(cfg, batch)
    assert fwd["matmul"] == 24 * batch * S * n * h**2 and fwd["attention"] == 4 * batch * S**2 * h * n
    assert training_flops(cfg, batch, "selective") == training_flops(cfg, batch, False) + fwd["attention"]
    causal = forward_flops(cfg, batch, causal=True)["attention"]
    assert causal == pytest.approx(fwd["attention"] * (S + 1) / (2 * S))


def test_narayanan_training_time_estimates() -> None:
    # section 5.1: GPT-3 175B on 1024 GPUs at 140 TFLOP/s for 300B tokens ~ 34 days; 1T on 3072 GPUs at 163
    # TFLOP/s for 450B tokens ~ 84 days (the paper uses 8*T*P/(n*X); the exact equation gives slightly more)
    for cfg, tokens, gpus, rate, days in ((gpt_config(96, 12288, 96), 300e9, 1024, 140e12, 34),
                                          (gpt_config(128, 25600, 160), 450e9, 3072, 163e12, 84)):  # fmt: skip
        per_token = training_flops(cfg, 1) / S
        assert tokens * per_token / (gpus * rate) / 86400 == pytest.approx(days, rel=0.03)


@pytest.mark.parametrize("name", list(KORTHIKANTI))
def test_model_flops_reproduce_published_mfu(name: str) -> None:
    a, h, n, t, p, batch, _, t_sel, mfu = KORTHIKANTI[name]
    cfg = gpt_config(n, h, a)
    measured = training_flops(cfg, batch, recompute="none") / (t_sel * t * p * 312e12)
    assert 100 * measured == pytest.approx(mfu, abs=0.2)  # times are published to 10 ms


def test_moe_and_gqa_flops_by_hand() -> None:
    cfg = MIXTRAL_8X7B.replace(seq=4096)
    h, f = 4096, 14336
    layer = 2 * h * h + 2 * h * 1024 + 2 * 3 * h * f + h * 8  # q,o; k,v; two of eight experts; router
    fwd = forward_flops(cfg, 1)
    assert fwd["matmul"] == 2 * 4096 * 32 * layer  # 2 * tokens * weights
    assert fwd["attention"] == 2 * 4096**2 * 32 * 256 * 32
    assert fwd["logits"] == 2 * 4096 * 32000 * 4096


# ---- memory ---------------------------------------------------------------------------------------------------------
def test_activation_memory_korthikanti_table2() -> None:
    a, h, s, b, t = 96, 12288, 2048, 1, 8  # GPT-3 175B layer, micro-batch 1, TP 8
    cfg, sbh = gpt_config(96, h, a), s * b * h
    assert activation_memory(cfg, b) == sbh * (34 + 5 * a * s / h)
    assert activation_memory(cfg, b, tp=t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert activation_memory(cfg, b, tp=t, sp=True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
    assert activation_memory(cfg, b, tp=t, recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
    assert activation_memory(cfg, b, tp=t, sp=True, recompute="selective") == pytest.approx(sbh * 34 / t)
    assert activation_memory(cfg, b, tp=t, recompute=True) == 2 * sbh
    # the same numbers by hand: 5as/h = 80 for GPT-3, so the score term is 2.35x the 34sbh rest
    assert activation_memory(cfg, 1) == 2048 * 12288 * 114 == 2_868_903_936
    assert activation_memory(cfg, 1, tp=8) == pytest.approx(2048 * 12288 * 23)
    assert activation_memory(cfg, 1, tp=8, sp=True, recompute="selective") == 2048 * 12288 * 4.25
    assert activation_memory(cfg, 2) == 2 * activation_memory(cfg, 1)


def test_activation_memory_generalised_shapes() -> None:
    cfg = LLAMA3_8B  # no dropout, gated MLP, GQA (g = 8 of 32), flash attention
    h, f, s = 4096, 14336, 8192
    per_token = 8 * h + 2 * (4096 + 2 * 1024) + 2 * 4096 + 3 * 2 * f + 4 * 32  # whole, q k v, proj in, MLP, LSE
    assert activation_memory(cfg, 1, dropout=False, flash=True) == s * per_token
    # context parallelism divides every term but the score term's key length
    assert activation_memory(cfg, 1, cp=4, dropout=False, flash=True) == s * per_token / 4
    assert activation_memory(cfg, 1, recompute="full", cp=2) == 2 * (s / 2) * h


def test_pipeline_activations_and_interleaving() -> None:
    a, h, n, t, p, batch = KORTHIKANTI["1T"][:6]
    cfg = gpt_config(n, h, a)
    par = Parallelism(tp=t, pp=p, sp=True, recompute="selective")
    acts = training_memory(cfg, par, batch, flash=False).activations
    # first stage of 1F1B holds p micro-batches of l/p layers: the whole model's activations, sbhL * 34/t
    assert acts == pytest.approx(S * h * n * 34 / t)
    inter = training_memory(cfg, Parallelism(tp=t, pp=p, vpp=2, sp=True, recompute="selective"), batch, flash=False)
    assert inter.activations == pytest.approx(acts * (1 + (p - 1) / (p * 2)))
    few = training_memory(cfg, par, 16, flash=False)  # 16 micro-batches < 64 stages
    assert few.activations == pytest.approx(acts * 16 / 64)


def test_zero_stages_match_zero_paper_figure1() -> None:
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 data-parallel ranks, K = 12
    psi = 7.5e9
    totals = [model_state_memory(psi, 64, zero).total / 1e9 for zero in range(4)]
    assert [round(x, 1) for x in totals] == [120.0, 31.4, 16.6, 1.9]
    with pytest.raises(ValueError):
        model_state_memory(psi, 64, 4)


def test_training_memory_weights_per_gpu_and_experts() -> None:
    cfg = gpt_config(96, 12288, 96)
    mem = training_memory(cfg, Parallelism(tp=8, pp=8, dp=4, zero=1), 64)
    layer = 12 * 12288**2 + 13 * 12288 + 2 * 24576  # 12h^2 + biases + two LayerNorms
    first = (12 * layer + (V + S) * 12288) / 8  # 12 layers and the embeddings, split 8 ways
    assert mem.weights == pytest.approx(2 * first, rel=1e-3) and mem.gradients == mem.weights
    assert mem.optimizer == pytest.approx(12 * first / 4, rel=1e-3)
    moe = training_memory(MIXTRAL_8X7B, Parallelism(dp=8, ep=8), 8).weights
    dense = training_memory(MIXTRAL_8X7B, Parallelism(dp=8), 8).weights
    experts = 32 * 8 * 3 * 4096 * 14336
    assert dense - moe == pytest.approx(2 * experts * (1 - 1 / 8))


def test_kv_cache_and_inference_memory() -> None:
    # Llama-3 70B: 2 * 80 layers * 8 kv heads * 128 * 2 bytes = 320 KiB per token
    assert kv_cache_bytes(LLAMA3_70B, 1, 1) == 327_680
    assert kv_cache_bytes(LLAMA3_70B, 4, 8192, tp=8) == 4 * 8192 * 327_680 / 8
    assert kv_cache_bytes(LLAMA3_70B, 1, 1, tp=16) == 327_680 / 8  # kv heads replicated beyond 8
    assert kv_cache_bytes(DEEPSEEK_V3, 1, 1) == 61 * 576 * 2  # MLA latent 512 + rope 64
    mem = inference_memory(LLAMA3_70B, 8, 4096, tp=4)
    assert mem.weights == LLAMA3_70B.num_params() * 2 / 4
    assert mem.total == mem.weights + mem.kv_cache


# ---- parallelism and communication ----------------------------------------------------------------------------------
def test_parallelism_validation_and_bubble() -> None:
    par = Parallelism(tp=8, pp=8, dp=2, vpp=2, micro_batch=2)
    assert par.gpus == 128 and par.micro_batches(64) == 16
    assert par.bubble_fraction(16) == 7 / (2 * 16)
    with pytest.raises(ValueError, match="multiple of micro_batch"):
        par.micro_batches(10)
    with pytest.raises(ValueError, match="zero must be"):
        Parallelism(zero=4)
    with pytest.raises(ValueError, match="needs pp"):
        Parallelism(vpp=2)
    with pytest.raises(ValueError, match="must divide"):
        Parallelism(ep=3, dp=4)
    with pytest.raises(ValueError, match="heads"):
        Parallelism(tp=3).check(LLAMA3_8B)
    with pytest.raises(ValueError, match="divide the number of experts"):
        Parallelism(dp=16, ep=16).check(MIXTRAL_8X7B)
    with pytest.raises(ValueError, match="interleaved"):
        Parallelism(pp=4, vpp=2).check(LLAMA3_8B, 6)


def test_collective_times_by_hand() -> None:
    link = Link(100e9, 2e-6)
    m = 1e9
    assert collective_time("all_reduce", m, 8, link) == pytest.approx(14 * 2e-6 + 2 * 7 / 8 * m / 100e9)
    assert collective_time("all_reduce", m, 8, link, "tree") == pytest.approx(6 * 2e-6 + 2 * m / 100e9)
    assert collective_time("all_gather", m, 4, link) == pytest.approx(3 * 2e-6 + 3 / 4 * m / 100e9)
    assert collective_time("reduce_scatter", m, 4, link, efficiency=0.5) == pytest.approx(6e-6 + 1.5 * m / 100e9)
    assert collective_time("send", m, 2, link) == pytest.approx(2e-6 + m / 100e9)
    assert collective_time("all_reduce", m, 1, link) == 0.0
    with pytest.raises(ValueError, match="unknown collective"):
        collective_time("broadcast", m, 4, link)
    assert DGX_A100.link(8)[1] == "intra" and DGX_A100.link(2, 8)[1] == "inter" and DGX_A100.link(4, 2)[1] == "intra"


# ---- step time ------------------------------------------------------------------------------------------------------
def test_step_time_parts_add_up_and_derived_rates() -> None:
    cfg = gpt_config(96, 12288, 96)
    par = Parallelism(tp=8, pp=8, dp=16, vpp=2, sp=True, recompute="selective", zero=1)
    st = training_step(cfg, A100, par, 1536, network=DGX_A100, dtype="fp16")
    parts = sum(st.compute.values()) + sum(st.communication.values()) + st.bubble_s + st.optimizer_s
    assert st.step_s == pytest.approx(parts)
    assert st.mfu == pytest.approx(training_flops(cfg, 1536, "none") / (st.step_s * 1024 * 312e12))
    assert st.hfu > st.mfu and st.tokens_per_s == pytest.approx(1536 * 2048 / st.step_s)
    assert all(v > 0 for v in (st.communication["tp"], st.communication["pp"], st.communication["dp"], st.bubble_s))
    with pytest.raises(ValueError, match="unknown efficiency"):
        training_step(cfg, A100, par, 1536, efficiency={"gemm": 0.5})


def test_step_time_single_gpu_is_the_roofline() -> None:
    cfg = gpt_config(24, 2304, 24)
    eff = {"matmul": 1.0, "attention": 1.0, "memory": 1.0}
    st = training_step(cfg, A100, Parallelism(), 8, efficiency=eff, dtype="fp16")
    fwd = forward_flops(cfg, 8)
    # GEMMs at this size are compute-bound: forward + 2x backward at peak
    assert st.compute["matmul"] == pytest.approx(3 * fwd["matmul"] / 312e12)
    assert st.compute["logits"] == pytest.approx(3 * fwd["logits"] / 312e12)
    assert st.bubble_s == 0 and sum(st.communication.values()) == 0
    full = training_step(cfg, A100, Parallelism(recompute="full"), 8, efficiency=eff, dtype="fp16")
    assert full.compute["matmul"] == pytest.approx(4 * fwd["matmul"] / 312e12)
    assert full.mfu < st.mfu and full.hfu == pytest.approx(st.hfu, rel=0.02)


def test_communication_terms_by_hand() -> None:
    cfg = gpt_config(48, 6144, 64)  # the 22B model on one DGX A100: TP 8 inside the node
    st = training_step(cfg, A100, Parallelism(tp=8), 4, network=DGX_A100, dtype="fp16")
    ar = 14 * 5e-6 + 2 * 7 / 8 * (2 * 2048 * 6144) / (0.8 * 300e9)  # ring all-reduce of 2bsh bytes on NVLink
    assert st.communication["tp"] == pytest.approx(4 * 48 * 4 * ar)  # 4 micro-batches, 48 layers, 4 per layer
    full = training_step(cfg, A100, Parallelism(tp=8, recompute="full"), 4, network=DGX_A100, dtype="fp16")
    assert full.communication["tp"] == pytest.approx(4 * 48 * 6 * ar)
    sp = training_step(cfg, A100, Parallelism(tp=8, sp=True), 4, network=DGX_A100, dtype="fp16")
    assert sp.communication["tp"] == pytest.approx(st.communication["tp"])  # AG + RS = one all-reduce
    # DP across nodes: ring all-reduce of the 2-byte gradients over the 25 GB/s NICs
    dp = training_step(cfg, A100, Parallelism(tp=8, dp=2), 8, network=DGX_A100, dtype="fp16")
    grads = 2 * cfg.num_params() / 8  # one stage: every parameter, split over TP 8
    assert dp.communication["dp"] == pytest.approx(2 * 10e-6 + grads / (0.8 * 25e9), rel=1e-6)
    # pipeline sends: 2 per micro-batch of 2bsh/t bytes, between nodes when TP fills the node
    pp = training_step(cfg, A100, Parallelism(tp=8, pp=2), 4, network=DGX_A100, dtype="fp16")
    assert pp.communication["pp"] == pytest.approx(4 * 2 * (10e-6 + 2 * 2048 * 6144 / 8 / (0.8 * 25e9)))


def test_interleaving_divides_the_bubble() -> None:
    cfg = gpt_config(64, 8192, 64)
    fast = Network(Link(1e30), Link(1e30))  # no communication cost: the bubble alone changes
    one = training_step(cfg, A100, Parallelism(tp=8, pp=8), 64, network=fast, dtype="fp16")
    two = training_step(cfg, A100, Parallelism(tp=8, pp=8, vpp=2), 64, network=fast, dtype="fp16")
    assert two.bubble_s == pytest.approx(one.bubble_s / 2)
    assert two.compute == pytest.approx(one.compute)
    m = one.micro_batches
    per_mb = (one.step_s - one.bubble_s - one.optimizer_s) / m  # the last rank's, with the logits
    logits = one.compute["logits"] / m
    # (p - 1) micro-batch times of an average rank: (p - 1)/m of the ideal time when ranks are equal
    assert one.bubble_s == pytest.approx(7 * (per_mb - logits + logits / 8))
    assert one.bubble_s / (m * per_mb) == pytest.approx(7 / 64, rel=0.05)


@pytest.mark.parametrize("row", TABLE1, ids=[f"{r[0]}B" for r in TABLE1])
def test_step_time_near_narayanan_table1(row: tuple) -> None:
    _, a, h, n, t, p, gpus, batch, measured = row
    par = Parallelism(tp=t, pp=p, dp=gpus // (t * p), recompute="full")
    st = training_step(gpt_config(n, h, a), A100, par, batch, network=DGX_A100, dtype="fp16", flash=False)
    predicted = st.hardware_flops / (st.step_s * gpus) / 1e12  # the paper counts recomputed FLOPs
    assert predicted == pytest.approx(measured, rel=0.2)  # uncalibrated defaults: within 20%


@pytest.mark.parametrize("name", list(KORTHIKANTI))
def test_step_time_near_korthikanti_table5(name: str) -> None:
    a, h, n, t, p, batch, t_full, t_sel, _ = KORTHIKANTI[name]
    cfg = gpt_config(n, h, a)
    for rec, sp, measured in (("full", False, t_full), ("selective", True, t_sel)):
        par = Parallelism(tp=t, pp=p, sp=sp, recompute=rec)
        st = training_step(cfg, A100, par, batch, network=DGX_A100, dtype="fp16", flash=False)
        assert st.step_s == pytest.approx(measured, rel=0.2)


def test_moe_step_time_expert_parallel() -> None:
    par = Parallelism(tp=1, pp=16, dp=64, ep=64, zero=1, recompute="full")
    st = training_step(DEEPSEEK_V3, H100, par, 1024)
    assert st.communication["ep"] > 0 and st.mfu < 1
    assert st.model_flops == training_flops(DEEPSEEK_V3, 1024, "none")


# ---- inference -------------------------------------------------------------------------------------------------------
def test_decode_small_batch_is_weights_plus_kv_over_bandwidth() -> None:
    eff = {"memory": 1.0}
    dec = decode_time(LLAMA3_8B, H100, 1, 4096, efficiency=eff)
    weights = LLAMA3_8B.num_params() - 128256 * 4096  # the embedding table is looked up, not streamed
    kv = kv_cache_bytes(LLAMA3_8B, 1, 4096)
    assert dec.seconds == pytest.approx((2 * weights + kv) / 3.35e12, rel=0.01)
    curve = decode_time(LLAMA3_8B, H100, np.array([1, 16, 256, 1024]), 4096)
    assert np.all(np.diff(curve.seconds) > 0) and np.all(np.diff(curve.tokens_per_s) > 0)
    longer = decode_time(LLAMA3_8B, H100, 16, np.array([1024, 8192, 65536]))
    assert np.all(np.diff(longer.seconds) > 0)


def test_prefill_is_compute_bound_and_tp_helps() -> None:
    eff = {"matmul": 1.0, "attention": 1.0}
    pre = prefill_time(LLAMA3_70B, H100, 1, 8192, efficiency=eff)
    fwd = forward_flops(LLAMA3_70B, 1, 8192, causal=True)
    assert pre.parts["matmul"] == pytest.approx(fwd["matmul"] / 989.5e12)  # compute-bound GEMMs at peak
    assert pre.parts["attention"] == pytest.approx(fwd["attention"] / 989.5e12)
    assert pre.parts["elementwise"] < 0.1 * pre.seconds and pre.parts["logits"] < 0.01 * pre.seconds
    tp8 = prefill_time(LLAMA3_70B, H100, 1, 8192, tp=8, efficiency=eff)
    assert pre.seconds / 8 < tp8.seconds < pre.seconds / 3  # split 8 ways, plus 160 all-reduces of 134 MB
    assert tp8.parts["tp"] == pytest.approx(160 * (2 * 7 / 8 * 8192 * 8192 * 2 / 360e9 + 14 * 5e-6))


def test_moe_decode_reads_only_routed_experts() -> None:
    one, two, many = (decode_time(MIXTRAL_8X7B, H100, b, 1) for b in (1, 2, 256))
    expert = 3 * 4096 * 14336 * 2
    # uniform routing, top 2 of 8: batch 1 reads 2 experts per layer, batch 2 8 * (1 - (6/8)^2) = 3.5, batch 256 all 8
    assert two.bytes - one.bytes == pytest.approx(32 * 1.5 * expert, rel=0.01)
    assert many.bytes - one.bytes == pytest.approx(32 * 6 * expert, rel=0.1)


def test_inference_refuses_a_misspelt_efficiency_key() -> None:
    with pytest.raises(ValueError, match="unknown efficiency keys"):
        prefill_time(LLAMA3_8B, H100, 1, 128, efficiency={"matmull": 0.5})
    with pytest.raises(ValueError, match="unknown efficiency keys"):
        decode_time(LLAMA3_8B, H100, 1, 128, efficiency={"memroy": 0.5})
