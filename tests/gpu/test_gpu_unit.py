"""Unit tests with closed-form expectations, datapath selection, components and configs."""

from __future__ import annotations

import copy
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_helpers import CONFIGS, GPUS, gpu  # noqa: E402

from archsim import arch  # noqa: E402
from archsim.workloads.errors import ConfigError, MappingError  # noqa: E402
from archsim.workloads.formats import FORMATS as F  # noqa: E402
from archsim.workloads.ops import AllReduce, Elementwise, Gemm, Softmax, Sparsity  # noqa: E402


@pytest.mark.parametrize("name", GPUS)
def test_configs_load(name: str) -> None:
    u = gpu(name)
    assert u.kind == "tensor_core_gpu" and u.name == "gpu"


def test_peak_rates_match_gpus_yaml() -> None:
    # A100: 108 SMs x 4 TCs x 256 FMA x 2 x 1.41 GHz = 311.9 TFLOPS (gpus.yaml peak_check)
    u = gpu("a100")
    g = Gemm(name="g", m=8, n=8, k=8)
    assert u.peak_macs_per_cycle(g) * 2 * 1.41e9 / 1e12 == pytest.approx(311.9, rel=1e-3)
    # H100 at its 1830 MHz boost: 132 x 4 x 512 x 2 x 1.83 GHz = 989.4 TFLOPS
    h = gpu("h100")
    assert h.peak_macs_per_cycle(g) * 2 * 1.83e9 / 1e12 == pytest.approx(989.4, rel=1e-3)


def test_copy_closed_form() -> None:
    # 1 GiB fp16 copy on H200: 2 GiB moved / (4800 GB/s x 0.9) + 4 us launch + 600 ns latency
    op = Elementwise(name="c", rows=1 << 14, cols=1 << 15, fn="copy")
    e = gpu("h200").estimate(op)
    expect = 2 * 2**30 / (4800e9 * 0.9) + 4e-6 + 600e-9
    assert e.latency_s == pytest.approx(expect, rel=1e-6)
    assert e.bound == "memory"


def test_large_allreduce_runs_nvls_or_the_simple_ring() -> None:
    # 8 GPUs, 256 MiB fp16, NCCL's protocols (configs/cluster/dgx_h100.yaml scale_up, carried
    # to h100.yaml's nvlink 450 GB/s). h100.yaml's board reduces in the switch (nvls: true):
    # NVLS 51.8 us + 256 MiB / (450 GB/s x 0.562) = 1113 us; measured 1092 us
    # (kernels_h100/nccl.csv.gz all_reduce,half,8,134217728). Without NVLS the cheapest is the
    # Simple ring, 55.7 us + 14 steps x 0.78 us + 2*7/8 x 256 MiB / (450 GB/s x 1.0 payload
    # x 0.78) = 1405 us (LL: 4745 us, LL128: 2183 us).
    op = AllReduce(name="ar", elements=128 * 2**20, devices=8)
    u = gpu("h100")
    e = u.estimate(op)
    assert e.mapping.startswith("nvls/simple")
    assert e.latency_s == pytest.approx(51.8e-6 + 256 * 2**20 / (450e9 * 0.562), rel=1e-4)
    flat = type(u)(u.name, replace(u.spec, nvlink=replace(u.spec.nvlink, nvls=False)),
                   u.node_nm)
    simple = 55.7e-6 + 14 * 0.78e-6 + 2 * 7 / 8 * 256 * 2**20 / (450e9 * 0.78)
    assert flat.estimate(op).latency_s == pytest.approx(simple, rel=1e-4)   # whole cycles
    assert flat.estimate(op).mapping.startswith("ring/simple")
    assert not gpu("t4").estimate(op).feasible  # no NVLink on T4


def test_small_allreduce_runs_ll_and_custom_oneshot() -> None:
    # 8 GPUs, 128 KiB fp16 (a decode step's activations): LL ring 5.0 + 14 x 0.78 us +
    # 7/4 x 128 KiB / (450 GB/s x 0.5 x 0.44) = 18.24 us (measured 19.0 us,
    # kernels_h100/nccl.csv.gz all_reduce,half,8,65536); vLLM's custom all-reduce in a CUDA
    # graph: one-shot 3.86 + 0.57 us + 7 x 128 KiB / (450 GB/s x 0.58) = 7.95 us
    op = AllReduce(name="ar", elements=64 * 2**10, devices=8)
    e = gpu("h100").estimate(op)
    ll = 5.0e-6 + 14 * 0.78e-6 + 7 / 4 * 128 * 2**10 / (450e9 * 0.5 * 0.44)
    assert e.mapping.startswith("ring/ll ")
    assert e.latency_s == pytest.approx(ll, rel=1e-4)
    c = gpu("h100").estimate(replace(op, impl="custom-graph"))
    assert c.latency_s == pytest.approx(3.86e-6 + 0.57e-6 + 7 * 128 * 2**10 / (450e9 * 0.58),
                                        rel=1e-4)


@pytest.mark.parametrize("elements", [64 * 2**10, 128 * 2**20])
def test_auto_allreduce_is_the_cheaper_of_custom_and_nccl(elements: int) -> None:
    """``auto`` (serve's default): the engine's custom kernel where it is faster than NCCL
    (128 KiB: one-shot 7.95 us < LL 18.24 us), NCCL above (256 MiB: NVLS 1113 us < two-shot
    2 x 7/8 x 256 MiB / (450 GB/s x 0.68) + 5.43 + 3.86 us = 1544 us)."""
    u = gpu("h100")
    op = AllReduce(name="ar", elements=elements, devices=8)
    t = {impl: u.estimate(replace(op, impl=impl)).latency_s
         for impl in ("nccl", "custom-graph", "auto")}
    assert t["auto"] == min(t["nccl"], t["custom-graph"])
    assert (t["auto"] == t["custom-graph"]) == (elements == 64 * 2**10)


def test_fp8_activations_reduce_in_bf16() -> None:
    """A quantised model's row-parallel layers write 16-bit outputs: the all-reduce of fp8
    activations moves 2 bytes per element (ALLREDUCE_MIN_BITS), fp32 ones 4."""
    u = gpu("h100")
    op = AllReduce(name="ar", elements=64 * 2**10, devices=8)
    f8 = replace(op, a_format=F["fp8_e4m3"])
    assert f8.payload_bytes() == 2 * 64 * 2**10 and f8.reduce_format == "bf16"
    assert u.estimate(f8).latency_s == u.estimate(op).latency_s
    assert replace(op, a_format=F["fp32"]).payload_bytes() == 4 * 64 * 2**10


def test_datapath_selection() -> None:
    u = gpu("a100")
    def path(a, w, mapping=None):
        e = u.estimate(Gemm(name="g", m=256, n=256, k=256, a_format=F[a], w_format=F[w]), mapping)
        return e.mapping.split()[0] if e.feasible else None
    assert path("fp16", "fp16") == "tc:fp16"
    assert path("fp16", "int4") == "w_only:fp16"         # Marlin-style W4A16
    assert path("int8", "int8") == "tc:int8"             # W8A8
    assert path("int4", "int4") == "tc:int4"             # W4A4 on int4 tensor cores
    assert path("int6", "int6") == "tc:int8"             # INT6 padded onto int8 MMA
    assert path("int6", "int6", "bitserial") == "bitserial:int1"     # 6 x 6 one-bit MMAs
    assert path("fp32", "fp32") == "simt:fp32_simt"
    assert path("int6", "int6", "bitserial") is not None
    h = gpu("h100")                                      # Hopper: no int4 / int1 tensor cores
    e = h.estimate(Gemm(name="g", m=64, n=64, k=64, a_format=F["int4"], w_format=F["int4"]))
    assert e.mapping.startswith("tc:int8")
    assert not h.estimate(Gemm(name="g", m=64, n=64, k=64, a_format=F["int4"],
                               w_format=F["int4"]), "bitserial").feasible


def test_sparse_24_doubles_compute_bound_rate() -> None:
    u = gpu("a100")
    dense = u.estimate(Gemm(name="g", m=8192, n=8192, k=8192))
    sparse = u.estimate(Gemm(name="g", m=8192, n=8192, k=8192, w_sparsity=Sparsity(2, 4)))
    assert 1.7 <= dense.latency_s / sparse.latency_s <= 2.0


def test_fused_attention_keeps_scores_on_chip() -> None:
    u = gpu("h100")
    qk = Gemm(name="attn.qk", m=4096, n=4096, k=128, batch=32, b_is_weight=False, role="qk")
    sm = Softmax(name="attn.softmax", rows=32 * 4096, cols=4096, role="attn")
    # h100.yaml runs attention fused by default: ask for the unfused kernels explicitly
    unf = u.estimate(qk, "attn_unfused").latency_s + u.estimate(sm, "attn_unfused").latency_s
    fus = u.estimate(qk, "attn_fused").latency_s + u.estimate(sm, "attn_fused").latency_s
    assert fus < 0.5 * unf
    assert u.estimate(qk, "attn_fused").dram_write_bytes == 0


def test_actions_name_components_and_energy_evaluates() -> None:
    energy = pytest.importorskip("archsim.energy")
    for name in GPUS:
        u = gpu(name)
        names = {c.name for c in u.components()}
        for op in (Gemm(name="g", m=512, n=512, k=512),
                   Gemm(name="g", m=1, n=4096, k=4096, w_format=F["int4"], group_size=128),
                   Softmax(name="s", rows=64, cols=64)):
            e = u.estimate(op)
            assert {k[0] for k in e.actions} <= names
            rep = energy.evaluate(u.components(), e.actions, e.latency_s)
            assert rep.total_j > 0


def test_bad_mapping_is_a_mapping_error() -> None:
    with pytest.raises(MappingError, match="unknown dataflow"):
        gpu("a100").estimate(Gemm(name="g", m=8, n=8, k=8), "nope")


def _raw(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


@pytest.mark.parametrize("mutate,where", [
    (lambda u: u.update(sm_cnt=108), "units[0].sm_cnt"),
    (lambda u: u["tensor_core"]["fma_per_clock"].update(fp99=1), "units[0].tensor_core.fma_per_clock.fp99"),
    (lambda u: u.update(tensor_clock_mhz=5000), "units[0].tensor_clock_mhz"),
    (lambda u: u["memory"].update(efficiency=1.5), "units[0].memory.efficiency"),
    (lambda u: u.update(attention="sometimes"), "units[0].attention"),
])
def test_bad_config_names_the_key(mutate, where) -> None:
    data = copy.deepcopy(_raw("a100"))
    mutate(data["units"][0])
    with pytest.raises(ConfigError) as exc:
        arch.load_data(data, "a100.yaml")
    assert where in str(exc.value)


def test_bad_config_file_reports_line(tmp_path: Path) -> None:
    text = (CONFIGS / "a100.yaml").read_text().replace("sm_count: 108", "sm_count: many")
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as exc:
        arch.load(p)
    msg = str(exc.value)
    assert "bad.yaml:" in msg and "units[0].sm_count" in msg and "expected int" in msg
