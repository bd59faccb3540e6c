"""The residual add fused into the next RMSNorm (vLLM's ``fused_add_rms_norm``; SGLang and
TensorRT-LLM run the same kernel): in the fused (default) inference graph of a pre-norm
RMSNorm transformer the add that feeds a norm is part of that norm op (``Norm(residual=
True)``); eager PyTorch graphs and training graphs keep the add as its own kernel."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

import archsim
from archsim.workloads.formats import get_format
from archsim.workloads.models.transformer import build_transformer
from archsim.workloads.ops import Elementwise, Norm
from archsim.workloads.zoo import transformer_shape

LLAMA = replace(transformer_shape("llama2-7b"), layers=3)
BF16 = get_format("bf16")
ROWS, COLS = 64, 2880


def _norm(residual: bool) -> Norm:
    return Norm(name="n", rows=ROWS, cols=COLS, norm="rmsnorm", residual=residual,
                a_format=BF16)


def test_fused_op_reads_and_writes_the_hidden_vector_twice():
    # reads x and the residual, writes the new residual and the output: 2 + 2 vectors of
    # rows x cols x 2 bytes, plus the gain (cols x 2 bytes); one add per element more
    vec = ROWS * COLS * 2
    f, n = _norm(True), _norm(False)
    assert f.input_bytes() == 2 * vec and f.output_bytes() == 2 * vec
    assert f.weight_bytes() == COLS * 2 == n.weight_bytes()
    assert (n.input_bytes(), n.output_bytes()) == (vec, vec)
    assert f.vector_ops() - n.vector_ops() == ROWS * COLS
    assert f.role == "norm"


@pytest.mark.parametrize("phase,seq,context", [("prefill", 64, None), ("decode", None, 128)])
def test_block_loses_its_two_residual_kernels(phase, seq, context):
    n = LLAMA.layers
    fused = build_transformer(LLAMA, phase, 2, seq, context)
    roles = Counter(op.role for op in fused.ops())
    # every add feeds a norm: the next block's ln1, the block's ln2, the final norm
    assert roles["residual"] == 0
    assert sum(op.residual for op in fused.ops() if isinstance(op, Norm)) == 2 * n + 1
    # the same graph built with a norm no engine fuses (layernorm) keeps 2 adds per block
    plain = build_transformer(replace(LLAMA, norm="layernorm"), phase, 2, seq, context)
    assert len(plain.ops()) - len(fused.ops()) == 2 * n
    # the fused norm reads what the add read: the block's branch and the residual stream
    ln2 = fused.op("blocks.1.ln2")
    assert set(fused.predecessors("blocks.1.ln2")) == {"blocks.1.attn.proj",
                                                        "blocks.1.ln1"}
    assert ln2.block == 1 and ln2.residual
    # the embedding has no add before it, block 0's ln1 is priced alike (every block the
    # same: a model is the sum of its per-block units)
    assert fused.op("blocks.0.ln1").residual
    assert fused.op("final_norm").residual


@pytest.mark.parametrize("kw", [{"kernels": "eager_amp"}, {"phase": "train"}])
def test_eager_and_training_graphs_keep_the_add(kw):
    phase = kw.pop("phase", "prefill")
    w = build_transformer(LLAMA, phase, 2, 64, **kw)
    adds = [op for op in w.ops() if op.role == "residual" and op.pass_ == "fwd"]
    assert len(adds) == 2 * LLAMA.layers
    assert all(isinstance(op, Elementwise) for op in adds)
    assert not any(getattr(op, "residual", False) for op in w.ops())


def test_no_norm_after_the_last_add_keeps_it():
    w = build_transformer(replace(LLAMA, final_norm=False), "decode", 2, None, 128)
    last = [op for op in w.ops() if op.role == "residual"]
    assert [op.name for op in last] == [f"blocks.{LLAMA.layers - 1}.ffn.residual"]
    assert last[0].block == LLAMA.layers - 1


def test_gpu_prices_the_fusion_as_one_launch():
    # H100 under its shipped runtime: each kernel pays one isolated launch; the fused op is
    # one kernel, so norm + add as two kernels cost at least one launch more than it
    u = archsim.load("gpu/h100").units[0]
    add = Elementwise(name="a", rows=ROWS, cols=COLS, fn="add", inputs=2, a_format=BF16)
    f, n, a = (u.estimate(o) for o in (_norm(True), _norm(False), add))
    assert f.details["launches"] == 1
    launch_s = u.spec.launch_overhead_us * 1e-6
    assert n.latency_s + a.latency_s - f.latency_s >= launch_s
    # the DRAM bytes: the norm's (its re-read of the row stays in L2) + one more vector
    # read and one more written
    vec = ROWS * COLS * 2
    assert f.dram_read_bytes == pytest.approx(n.dram_read_bytes + vec)
    assert f.dram_write_bytes == pytest.approx(n.dram_write_bytes + vec)


@pytest.mark.parametrize("design", ["fpga/sat_vcu1525", "spatial/tpu_like"])
def test_streaming_families_price_the_same_bytes(design):
    u = archsim.load(design).units[0]
    e = u.estimate(_norm(True))
    vec = ROWS * COLS * 2
    assert e.dram_read_bytes == pytest.approx(2 * vec + COLS * 2)
    assert e.dram_write_bytes == pytest.approx(2 * vec)


def test_gpu_fused_reread_hits_l2_when_the_stream_fits():
    # the second pass re-reads the new stream only: a stream that fits in L2's usable part
    # is re-read from L2 even when the two inputs together do not fit
    u = archsim.load("gpu/h100").units[0]
    l2 = u.spec.l2.l2_bytes * u.spec.l2.usable_fraction
    rows = int(0.9 * l2 / (COLS * 2))
    f = Norm(name="f", rows=rows, cols=COLS, norm="rmsnorm", residual=True, a_format=BF16)
    assert f.stream_bytes() <= l2 < f.input_bytes()
    e = u.estimate(f)
    assert e.dram_read_bytes == pytest.approx(f.input_bytes() + f.weight_bytes())
    assert e.dram_write_bytes == pytest.approx(f.output_bytes())
