"""Host runtime, the Attention op and `archsim calibrate` on the GPU family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import archsim
from archsim.api import load, preferred_attention, workload
from archsim.arch.gpu.host import RUNTIMES
from archsim.workloads.errors import WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Attention
from tests.gpu.gpu_helpers import gpu

DATA = Path(__file__).resolve().parents[1] / "data" / "silicon"
BF16 = FORMATS["bf16"]


def _decode(runtime: str) -> archsim.Result:
    acc = load("gpu/h100", [f"units[0].runtime={runtime}"])
    return archsim.evaluate(acc, workload("gpt2-xl", phase="decode", batch=1, context=128,
                                          attention=preferred_attention(acc)))


def test_eager_hf_and_cuda_graph_decode_differ_on_wall_not_device() -> None:
    """Same kernels, same device time; the wall time is a launch queue (the host issues op
    after op without waiting, the device runs each once issued and its predecessor is done):
    HF eager (114 us per op) makes every small decode op wait on the host, so the wall is the
    host's total plus the last op's device time; a CUDA graph (1 us per kernel) hides behind
    the device."""
    hf, graph = _decode("eager_hf"), _decode("cuda_graph")
    assert hf.latency_s == pytest.approx(graph.latency_s, rel=1e-12)
    n = len(hf.ops)
    h = RUNTIMES["eager_hf"]
    # every decode kernel is shorter than 114 us, so the device never gets ahead of the host
    assert all(o.latency_s < h for o in hf.ops)
    wall_hf = sum(o.details["host_s"] for o in hf.ops) + hf.ops[-1].latency_s
    # one op = h; a fused Attention op = the three ops (QK, softmax, AV) HF's Python runs
    assert all(o.details["host_s"] == pytest.approx(3 * h if o.kind == "attention" else h)
               for o in hf.ops)
    assert hf.extra["host"]["wall_s"] == pytest.approx(wall_hf, rel=1e-9)
    assert hf.extra["host"]["host_bound_ops"] == n            # every op waits for Python
    assert graph.extra["host"]["wall_s"] == pytest.approx(graph.latency_s, rel=0.02)
    assert hf.extra["host"]["wall_s"] > 5 * graph.extra["host"]["wall_s"]
    text = hf.table()
    assert "wall" in text and "eager_hf" in text and "host-bound" in text


def test_energy_over_the_wall_adds_idle_board_power_while_waiting_on_the_host() -> None:
    """While the GPU waits on Python the board draws its idle power: 135 W measured with
    nothing running (shared/reference/silicon/README.md). The extra energy over the wall time,
    divided by the host-bound time, is that power (the model's static power; the library's
    SRAM leakage adds a few W), and a CUDA graph, hidden behind the device, adds ~nothing."""
    hf, graph = _decode("eager_hf"), _decode("cuda_graph")
    h = hf.extra["host"]
    waited = h["wall_s"] - h["device_s"]
    assert waited > 0.01                                    # 10+ ms of host-bound decode
    assert (h["energy_j"] - hf.energy_j) / waited == pytest.approx(135.0, rel=0.05)
    g = graph.extra["host"]
    assert g["energy_j"] == pytest.approx(graph.energy_j, rel=0.02)
    assert f"{h['energy_j']:.3g} J" in hf.table()


def test_ideal_runtime_reports_no_host() -> None:
    res = archsim.evaluate(load("gpu/a100"), archsim.gemm_workload(256, 256, 256))
    assert "host" not in res.extra and "wall_s" not in res.ops[0].details


def test_gemm_cli_json_reports_power_clock_energy(capsys: pytest.CaptureFixture[str]) -> None:
    from archsim.cli import main

    assert main(["gemm", "gpu/h100", "--m", "8192", "--n", "8192", "--k", "8192",
                 "--a-format", "bf16", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    op = d["ops"][0]["details"]
    assert 1100 < op["clock_mhz"] < 1500          # power-capped (measured 1245-1395 MHz)
    assert 600 < op["power_w"] <= 700             # at the 700 W limit
    assert d["energy_j"] == pytest.approx(1.14, rel=0.15)    # issue 16: 1.14 J measured


def test_attention_decode_closed_form() -> None:
    """Split-KV decode, b=1, h=32, L=32768, d=128, bf16: K+V = 2 x 32 x 32768 x 128 x 2 B =
    512 MiB (+ Q, O 16 KiB); T = 2 x 5 us launch + 0.6 us + bytes / (3350 GB/s x 0.9).
    Measured (silicon/h100.jsonl): 0.1936 ms."""
    op = Attention(name="a", batch=1, heads=32, kv_heads=32, q_len=1, kv_len=32768,
                   head_dim=128, a_format=BF16, w_format=BF16)
    e = gpu("h100").estimate(op)
    read = (32 * 128 + 2 * 32 * 32768 * 128) * 2
    expect = 2 * 5e-6 + 600e-9 + (read + 32 * 128 * 2) / (3350e9 * 0.9)
    assert e.latency_s == pytest.approx(expect, rel=1e-4)
    assert e.latency_s == pytest.approx(0.1936e-3, rel=0.10)


def test_causal_cta_imbalance_closed_form() -> None:
    """Causal 512 x 512, 32 heads: 4 query blocks of 128 rows per head; block j's rows see
    128j + 1 ... 128j + 128 keys, i.e. 16384 j + 8256 pairs (8256, 24640, 41024, 57408; sum
    131328 = 512 x 513 / 2). 128 CTAs fit on 132 SMs at once, so the longest sets the time:
    57408 / (32 x 131328 / 132) = 1.8032. Equal CTAs: 132 of them fill one wave exactly (1.0),
    133 need a second wave (2 x 132 / 133)."""
    from archsim.arch.gpu.kernels import cta_imbalance

    def att(heads: int, q: int, causal: bool) -> Attention:
        return Attention(name="a", batch=1, heads=heads, kv_heads=heads, q_len=q, kv_len=q,
                         head_dim=128, causal=causal, a_format=BF16, w_format=BF16)

    assert cta_imbalance(att(32, 512, True), 132) == pytest.approx(57408 / (32 * 131328 / 132))
    assert cta_imbalance(att(132, 128, False), 132) == pytest.approx(1.0)
    assert cta_imbalance(att(133, 128, False), 132) == pytest.approx(2 * 132 / 133)
    # long sequences even out (many CTAs, longest first)
    assert 1.0 <= cta_imbalance(att(32, 8192, True), 132) < 1.02


def test_attention_causal_halves_the_work() -> None:
    full = Attention(name="a", batch=1, heads=8, kv_heads=8, q_len=4096, kv_len=4096,
                     head_dim=128)
    causal = Attention(name="a", batch=1, heads=8, kv_heads=8, q_len=4096, kv_len=4096,
                       head_dim=128, causal=True)
    # pairs: 4096^2 vs 4096^2 - 4096 x 4095 / 2
    assert causal.macs() == 2 * 8 * (4096 * 4096 - 4096 * 4095 // 2) * 128
    assert full.macs() == 2 * 8 * 4096 * 4096 * 128
    u = gpu("h100")
    assert u.estimate(causal).latency_s < 0.6 * u.estimate(full).latency_s
    with pytest.raises(WorkloadError, match="kv_heads"):
        Attention(name="x", batch=1, heads=6, kv_heads=4, q_len=1, kv_len=1, head_dim=8)


def test_zoo_uses_attention_op_when_design_is_fused() -> None:
    assert preferred_attention(load("gpu/h100")) == "fused"
    assert preferred_attention(load("gpu/a100")) == "unfused"
    fused = workload("llama2-7b", phase="prefill", batch=1, seq=512, attention="fused")
    plain = workload("llama2-7b", phase="prefill", batch=1, seq=512)
    assert sum(o.kind == "attention" for o in fused) == 32
    assert not any(o.kind == "attention" for o in plain)
    assert len(plain) - len(fused) == 32 * 2        # qk + softmax + av -> one op
    train = workload("gpt2-small", phase="train", batch=1, seq=128, attention="fused")
    bwd = [o for o in train if o.kind == "attention" and o.pass_ == "bwd_data"]
    fwd = [o for o in train if o.kind == "attention" and o.pass_ == "fwd"]
    assert len(bwd) == len(fwd) == 12
    assert bwd[0].macs() == fwd[0].macs() * 5 // 2    # five GEMMs against two


def test_calibrate_cli_fits_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from archsim.cli import main

    out = tmp_path / "h100_cal.yaml"
    assert main(["calibrate", str(DATA / "h100_calibration.jsonl"), "--config", "gpu/h100",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "before" in text and "after" in text and "power.core_energy_scale" in text
    acc = load(out)
    assert acc.units[0].spec.power.core_energy_scale == pytest.approx(
        gpu("h100").spec.power.core_energy_scale, rel=1e-3)


def test_calibrate_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from archsim.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "device"}\nnot json\n')
    out = tmp_path / "x.yaml"
    assert main(["calibrate", str(bad), "--config", "gpu/h100", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2" in err and "Traceback" not in err
    assert not out.exists()
    # a config without a power section
    assert main(["calibrate", str(DATA / "h100_calibration.jsonl"), "--config", "gpu/a100",
                 "--out", str(out)]) == 2
    assert "power" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("override,where", [
    ("units[0].power.vf_volts=[1.0]", "units[0].power.vf_mhz"),
    ("units[0].power.vf_mhz=[1980,345,1000,1400,1755]", "units[0].power.vf_mhz"),
    ("units[0].clock_mhz=1900", "units[0].power.vf_mhz"),
    ("units[0].runtime=lazy", "units[0].runtime"),
    ("units[0].tensor_core.library_rate_fraction.int4=0.5",
     "units[0].tensor_core.library_rate_fraction.int4"),
    ("units[0].cuda_core.reduce_pass_bytes_per_clock=-1",
     "units[0].cuda_core.reduce_pass_bytes_per_clock"),
    ("units[0].cuda_core.reduce_pass_bytes_per_clock=fast",
     "units[0].cuda_core.reduce_pass_bytes_per_clock"),
])
def test_bad_power_and_runtime_keys_name_the_key(override: str, where: str) -> None:
    from archsim.workloads.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        load("gpu/h100", [override])
    assert where in exc.value.render()


def test_bad_config_key_on_the_cli_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from archsim.cli import main

    assert main(["gemm", "gpu/h100", "--m", "8", "--n", "8", "--k", "8", "--set",
                 "units[0].cuda_core.reduce_pass_bytes_per_clock=-1"]) == 2
    err = capsys.readouterr().err
    assert "reduce_pass_bytes_per_clock" in err and ">= 0.01" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_measure_script_refuses_cleanly_without_a_gpu(tmp_path: Path) -> None:
    """benchmarks/silicon/measure.py: bad suite -> exit 2; no torch / no CUDA -> exit 2 and
    no output file (it only runs on a GPU machine)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "silicon" / "measure.py"
    spec = importlib.util.spec_from_file_location("measure", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "m.jsonl"
    assert mod.main(["--out", str(out), "--only", "nope"]) == 2
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        assert mod.main(["--out", str(out), "--only", "launch"]) == 2
        assert not out.exists()


def test_launch_queue_lets_the_host_run_ahead_of_long_kernels() -> None:
    """Hand-made queue: host 10 us per op; device 100, 1, 1, 1 us. The host issues op 2-4
    while op 1 runs (done by t = 40 us < 110), so the device never waits after op 1: wall =
    10 + 100 + 3 = 113 us, not the per-op max(device, host) sum (100 + 3 x 10 = 130 us)."""
    from types import SimpleNamespace

    from archsim.api import _host_summary

    rows = [SimpleNamespace(latency_s=d * 1e-6, details={"host_s": 10e-6})
            for d in (100, 1, 1, 1)]
    acc = SimpleNamespace(units=[SimpleNamespace(host_runtime=lambda: ("eager", ""))])
    s = _host_summary(acc, rows, latency=103e-6)
    assert s["wall_s"] == pytest.approx(113e-6, rel=1e-9)
    assert s["host_bound_ops"] == 1
