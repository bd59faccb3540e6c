"""``kernels="eager_amp"``: the kernels PyTorch eager runs for HF module code under autocast.

Expected values are counted from the module code (HF ``GPT2Block``/``NewGELUActivation``,
``torch.autocast``'s fp32 op list), not from the builder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import archsim
from archsim.cli import main
from archsim.workloads.errors import WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Elementwise, Gemm, Norm, Softmax

BF16, FP32 = FORMATS["bf16"], FORMATS["fp32"]
D, L, V, FF = 768, 12, 50257, 3072          # GPT-2 small


def _gpt2(phase: str = "train", **kw: object) -> archsim.Workload:
    return archsim.workload("gpt2-small", phase=phase, batch=2, seq=128, kernels="eager_amp",
                            attention="fused", **kw)


def test_parameters_are_the_models() -> None:
    """The kernels change, the model does not: same parameter count as the fused graph."""
    fused = archsim.workload("gpt2-small", phase="train", batch=2, seq=128)
    assert _gpt2().parameters == fused.parameters


def test_weight_casts_cover_every_linear_weight_once() -> None:
    """autocast casts each fp32 weight to bf16 once per step (cast cache): 6 bytes a weight
    (4 read + 2 written) over the linear weights, the tied LM head included."""
    w = _gpt2("prefill")
    casts = [o for o in w.ops() if o.name.endswith(".cast_w")]
    linear = L * (D * 3 * D + D * D + 2 * D * FF) + V * D
    assert sum(o.elements for o in casts) == linear
    assert all(o.a_format == FP32 and o.out_format == BF16 for o in casts)
    assert sum(o.input_bytes() + o.output_bytes() for o in casts) == 6 * linear


def test_autocast_format_policy() -> None:
    """GEMMs in bf16; layer norms, the residual stream and the loss in fp32."""
    w = _gpt2()
    fwd = [o for o in w.ops() if o.pass_ == "fwd"]
    assert all(o.a_format == BF16 and o.w_format == BF16 for o in fwd if isinstance(o, Gemm))
    assert all(o.a_format == FP32 for o in fwd if isinstance(o, Norm))
    assert all(o.a_format == FP32 for o in fwd if o.name.endswith("residual"))
    sm = [o for o in fwd if isinstance(o, Softmax)]
    assert [(o.name, o.rows, o.cols, o.a_format) for o in sm] == [
        ("head.log_softmax", 2 * 128, V, FP32)]


def test_gelu_new_is_nine_kernels() -> None:
    """NewGELUActivation: cast up (pow is fp32-listed), pow, *c, +x, *s, tanh, +1, 0.5*x, *:
    nine forward kernels per block, eight of them in fp32."""
    w = _gpt2("prefill")
    act = [o for o in w.ops() if ".ffn.act" in o.name and o.layer == "blocks.0"]
    assert len(act) == 9
    assert sum(o.a_format == FP32 for o in act) == 7      # + the cast reads bf16, 0.5*x bf16
    assert all(o.rows * o.cols == 2 * 128 * FF for o in act)


def test_dropout_only_when_training() -> None:
    """GPT-2 trains with dropout 0.1 (embedding, attention output, MLP output): 1 + 2 L
    dropout kernels in train, none in prefill."""
    def n(w: archsim.Workload) -> int:
        return sum(1 for o in w.ops() if o.pass_ == "fwd" and "dropout" in o.name)
    assert n(_gpt2()) == 1 + 2 * L
    assert n(_gpt2("prefill")) == 0


def test_cast_backward_is_a_cast_back() -> None:
    w = _gpt2()
    b = w.op("blocks.0.attn.qkv.cast_w.bwd")
    assert isinstance(b, Elementwise)
    assert (b.a_format, b.out_format, b.inputs) == (BF16, FP32, 1)


def test_eager_costs_more_than_fused_on_a_gpu() -> None:
    """Same MACs, more memory traffic: the eager step is slower and moves more bytes."""
    acc = archsim.load("gpu/h100")
    fused = archsim.workload("gpt2-small", phase="train", batch=2, seq=128, a_format="bf16",
                             w_format="bf16", attention="fused")
    eager = _gpt2()
    rf, re_ = archsim.evaluate(acc, fused), archsim.evaluate(acc, eager)
    assert sum(o.macs for o in re_.ops) == sum(o.macs for o in rf.ops)
    assert re_.latency_s > rf.latency_s
    assert sum(o.dram_bytes for o in re_.ops) > sum(o.dram_bytes for o in rf.ops)


@pytest.mark.parametrize("kw,path", [({"kernels": "bogus"}, "kernels"),
                                     ({"w_format": "int8"}, "--w-format")])
def test_bad_options_name_the_key(kw: dict[str, str], path: str) -> None:
    args = {"kernels": "eager_amp", **kw}
    with pytest.raises(WorkloadError) as e:
        archsim.workload("gpt2-small", **args)
    assert e.value.problems[0].path == path


def test_cnn_refuses_eager_amp() -> None:
    with pytest.raises(WorkloadError) as e:
        archsim.workload("resnet50", kernels="eager_amp")
    assert "transformers" in str(e.value)


def test_hf_gpt2_config_gets_the_same_graph(tmp_path: Path) -> None:
    """An HF GPT-2 config.json (gelu_new, default dropout 0.1) builds the zoo's eager graph."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "gpt2", "n_embd": D, "n_layer": L, "n_head": 12,
                             "n_positions": 1024, "vocab_size": V,
                             "activation_function": "gelu_new"}))
    hf = archsim.workload(str(p), phase="train", batch=2, seq=128, kernels="eager_amp",
                          attention="fused")
    assert sorted(o.name for o in hf.ops()) == sorted(o.name for o in _gpt2().ops())


def test_cli_flag_and_header(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "gpu/h100", "--model", "gpt2-small", "--phase", "train", "--batch", "1",
               "--seq", "128", "--kernels", "eager_amp"])
    out = capsys.readouterr().out
    assert rc == 0 and "kernels eager_amp (autocast bf16" in out
    assert main(["run", "gpu/h100", "--model", "resnet50", "--kernels", "eager_amp"]) == 2
    assert "kernels" in capsys.readouterr().err


def test_format_flags_keep_the_optimizer_in_fp32() -> None:
    """--a-format/--w-format set the compute formats; AdamW still reads and writes fp32
    parameters, gradients and moments (4 inputs + 1 output of 4 bytes per parameter)."""
    w = archsim.workload("gpt2-small", phase="train", batch=1, seq=128, a_format="bf16",
                         w_format="bf16")
    upd = [o for o in w.ops() if o.pass_ == "update"]
    assert upd and all(o.a_format == FP32 for o in upd)
    assert sum(o.input_bytes() + o.output_bytes() for o in upd) == 20 * w.parameters


def test_cli_unknown_kernels_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:     # argparse: usage error, exit 2
        main(["run", "gpu/h100", "--model", "gpt2-small", "--kernels", "bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--kernels" in err and "Traceback" not in err


# ---- the backward kernels autograd runs (tools/autograd/derivatives.yaml, the engine) ----

M = 2 * 128                                  # rows of _gpt2(): batch 2 x seq 128


def _bwd(w: archsim.Workload, layer: str, part: str) -> list[Elementwise]:
    return [o for o in w.ops() if isinstance(o, Elementwise) and o.layer == layer
            and part in o.name and o.pass_ in ("bwd_data", "bwd_weight")]


def test_nll_backward_zero_fills_the_whole_logits() -> None:
    """nll_loss_backward zero-fills an fp32 gradient of the logits before scattering -1/rows:
    on the measured step (batch 8, seq 1024) 8 x 1024 x 50257 x 4 B = 1,646,821,376 B
    written, nothing read; the scatter itself touches one value per row."""
    w = archsim.workload("gpt2-small", phase="train", batch=8, seq=1024, kernels="eager_amp",
                         attention="fused")
    z = w.op("head.nll_loss.bwd_zero")
    assert isinstance(z, Elementwise)
    assert (z.input_bytes(), z.output_bytes()) == (0, 1_646_821_376)
    s = w.op("head.nll_loss.bwd")
    assert isinstance(s, Elementwise) and s.elements == 8 * 1024
    # the loss is the last forward op: its backward runs first, then log_softmax's
    assert [o.name for o in w.ops() if o.pass_ != "fwd"][:3] == [
        "head.nll_loss.bwd_zero", "head.nll_loss.bwd", "head.log_softmax.bwd"]


def test_gelu_new_backward_is_fourteen_kernels() -> None:
    """Per block: cast back to bf16 (1) and 2 adds summing x's three gradients (x feeds the
    fp32 cast, x + c and 0.5 * x); pow_backward: x.pow(2), * 3, * grad (3); 0.044715 * and
    sqrt(2/pi) * (1 each); x + c: the engine's fp32 -> bf16 cast of x's gradient (1); tanh
    (1); 1 + t: none; 0.5 * x (1); the last mul, both inputs needing gradients: two muls
    and the cast of 0.5x's gradient to bf16 (3). 1+2+3+1+1+1+1+0+1+3 = 14."""
    ops = _bwd(_gpt2(), "blocks.0", ".ffn.act.")
    assert len(ops) == 14
    assert all(o.elements == M * FF for o in ops)
    assert not _bwd(_gpt2(), "blocks.0", ".ffn.act.add_1")
    casts = [o for o in ops if o.out_format == BF16]
    assert len(casts) == 3 and all(o.a_format == FP32 and o.inputs == 1 for o in casts)


def test_bias_gradients_exactly_for_linear_layers_with_bias() -> None:
    """GPT-2's four Conv1D per block have biases, the tied LM head has none: 4 L column
    reductions, each reading the bf16 output gradient (M x n x 2 B) and writing n x 2 B."""
    w = _gpt2()
    red = {o.name: o for o in w.ops() if o.name.endswith(".bwd_bias")}
    widths = {"attn.qkv": 3 * D, "attn.proj": D, "ffn.up": FF, "ffn.down": D}
    assert set(red) == {f"blocks.{i}.{k}.bwd_bias" for i in range(L) for k in widths}
    for k, n in widths.items():
        o = red[f"blocks.3.{k}.bwd_bias"]
        assert isinstance(o, Elementwise) and o.pass_ == "bwd_weight"
        assert (o.input_bytes(), o.output_bytes()) == (M * n * 2, n * 2)


def test_dropout_mask_is_one_byte_an_element() -> None:
    """native_dropout writes its output and a bool mask; the backward reads the gradient and
    the mask: 2 + 1 B written and 2 + 1 B read per bf16 element (fp32 embedding: 4 + 1)."""
    w = _gpt2()
    f, b = w.op("blocks.0.attn.dropout_out"), w.op("blocks.0.attn.dropout_out.bwd")
    assert isinstance(f, Elementwise) and isinstance(b, Elementwise)
    assert (f.input_bytes(), f.output_bytes()) == (2 * M * D, 3 * M * D)
    assert (b.input_bytes(), b.output_bytes()) == (3 * M * D, 2 * M * D)
    e = w.op("embed.dropout.bwd")
    assert isinstance(e, Elementwise) and e.input_bytes() == 5 * M * D


def test_layernorm_backward_and_residual_gradients() -> None:
    """layer_norm backward: the fp32 dx kernel plus a gain/shift reduction re-reading dy and
    x (2 x M x D x 4 B); each residual add passes its gradient on, the engine casting the
    branch's copy to bf16 and summing the stream's two gradients: 2 L adds in fp32."""
    w = _gpt2()
    g = w.op("blocks.0.ln1.bwd_weight")
    assert isinstance(g, Elementwise)
    assert (g.input_bytes(), g.output_bytes()) == (2 * M * D * 4, 2 * D * 4)
    acc = [o for o in w.ops() if o.name.endswith("residual.bwd_accumulate")]
    assert len(acc) == 2 * L and all(o.a_format == FP32 and o.inputs == 2 for o in acc)
    cast = w.op("blocks.0.ffn.residual.bwd")
    assert isinstance(cast, Elementwise) and (cast.a_format, cast.out_format) == (FP32, BF16)


def test_tied_table_gradient_is_zero_filled_and_accumulated() -> None:
    """embedding_dense_backward zero-fills the fp32 table's gradient (V x D x 4 B) and the
    tied table's two gradients (embedding, LM head) are summed: one add of 3 x V x D x 4 B."""
    w = _gpt2()
    z, a = w.op("embed.tokens.bwd_zero"), w.op("embed.tokens.bwd_accumulate")
    assert isinstance(z, Elementwise) and isinstance(a, Elementwise)
    assert z.output_bytes() == V * D * 4 and z.input_bytes() == 0
    assert a.input_bytes() + a.output_bytes() == 3 * V * D * 4
    assert "embed.positions.bwd_accumulate" not in w.graph


def test_fused_training_graph_is_unchanged() -> None:
    """The default kernels keep one backward op per forward op: forward 3 + 10 L + 2 = 125
    ops; backward 3 (embeddings, add) + 14 L (GEMMs 2 each, the rest 1) + 3 = 174; Adam
    updates for the 2 tables, 6 L layers, the final norm = 75. 125 + 174 + 75 = 374."""
    w = archsim.workload("gpt2-small", phase="train", batch=2, seq=128, attention="fused")
    assert len(w.ops()) == 374
    assert not [o for o in w.ops() if isinstance(o, Elementwise) and o.mask]
    assert not [o for o in w.ops() if "bwd_" in o.name and o.name.split(".")[-1] not in
                ("bwd_data", "bwd_weight")]


def test_bad_mask_names_the_op() -> None:
    with pytest.raises(WorkloadError) as e:
        Elementwise(name="drop", rows=1, cols=1, fn="mul", mask="bool")
    assert e.value.problems[0].path == "drop" and "mask" in str(e.value)
