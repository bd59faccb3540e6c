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
from workloads.errors import WorkloadError
from workloads.formats import FORMATS
from workloads.ops import Elementwise, Gemm, Norm, Softmax

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
