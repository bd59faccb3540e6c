"""Devices built from public spec sheets (issue 31 item 6): V100, RTX A6000, RTX 4090, MI250X (one GCD),
Xeon Sapphire Rapids (AMX) and the clusters they ran in (DGX-1, DGX-2, MI250X package,
Frontier-like). Each peak is recomputed from the spec fields in closed form and compared with
the vendor's published figure (the figure is written here, not read from the model)."""

from __future__ import annotations

import pytest

import archsim
from archsim.arch.cluster import find_cluster, load_cluster
from archsim.cli import main


def spec(name: str):
    return archsim.load(name).units[0].spec


def tflops(name: str, fmt: str) -> float:
    """Dense tensor-core peak: SMs x tensor cores/SM x FMA/clock x 2 FLOP x boost clock."""
    s = spec(name)
    return (s.sm_count * s.tensor_core.per_sm * s.tensor_core.fma_per_clock[fmt] * 2
            * s.boost_clock_mhz * 1e6 / 1e12)


def fp32_tflops(name: str) -> float:
    s = spec(name)
    return s.sm_count * s.cuda_core.fp32_lanes_per_sm * 2 * s.boost_clock_mhz * 1e6 / 1e12


# (design, format, published dense TFLOP/s, source); rel. tolerance 0.5%: vendors round.
PEAKS = [
    ("gpu/v100", "fp16", 125.0, "V100 SXM2 datasheet: 125 TFLOPS tensor"),
    ("gpu/a6000", "fp16", 309.7 / 2, "RTX A6000 datasheet: 309.7 TFLOPS tensor with sparsity"),
    ("gpu/a6000", "int8", 309.7, "GA102 whitepaper: int8 = 2x fp16 dense"),
    ("gpu/rtx4090", "fp16", 165.2, "Ada whitepaper, RTX 4090: 165.2 TFLOPS fp16, fp32 accumulate"),
    ("gpu/rtx4090", "fp8_e4m3", 330.3, "Ada whitepaper, RTX 4090: 330.3 TFLOPS fp8, fp32 accumulate"),
    ("gpu/rtx4090", "int8", 660.6, "Ada whitepaper, RTX 4090: 660.6 TOPS int8 dense"),
    ("gpu/mi250x", "fp16", 383.0 / 2, "MI250X datasheet: 383 TFLOPS fp16 per package, 2 GCDs"),
    ("gpu/mi250x", "bf16", 383.0 / 2, "MI250X datasheet: 383 TFLOPS bf16 per package"),
    ("gpu/mi250x", "int8", 383.0 / 2, "MI250X datasheet: 383 TOPS int8 per package"),
    # Intel quotes AMX per core per cycle: 1024 bf16 / 2048 int8 ops; 56 cores at 2.0 GHz.
    ("cpu/xeon_spr", "bf16", 56 * 1024 * 2.0e9 / 1e12, "Intel AMX: 1024 bf16 ops/cycle/core"),
    ("cpu/xeon_spr", "int8", 56 * 2048 * 2.0e9 / 1e12, "Intel AMX: 2048 int8 ops/cycle/core"),
]


@pytest.mark.parametrize("design, fmt, published, source", PEAKS)
def test_tensor_peak_matches_the_spec_sheet(design, fmt, published, source):
    assert tflops(design, fmt) == pytest.approx(published, rel=0.005), source


@pytest.mark.parametrize("design, published", [
    ("gpu/v100", 15.7),            # V100 SXM2 datasheet
    ("gpu/a6000", 38.7),           # RTX A6000 datasheet
    ("gpu/rtx4090", 82.6),         # Ada whitepaper, RTX 4090
    ("gpu/mi250x", 47.9 / 2),      # MI250X datasheet, FP32 vector per package / 2
])
def test_fp32_peak_matches_the_spec_sheet(design, published):
    assert fp32_tflops(design) == pytest.approx(published, rel=0.005)


def test_model_peak_is_the_closed_form():
    """The unit's own peak (MACs/cycle x clock) equals the closed form above."""
    acc = archsim.load("gpu/v100")
    u = acc.units[0]
    op = archsim.api.gemm_workload(4096, 4096, 4096, a_format="fp16").ops()[0]
    assert u.peak_macs_per_cycle(op) * 2 * u.clock_hz / 1e12 == pytest.approx(
        80 * 8 * 64 * 2 * 1.53e9 / 1e12)


@pytest.mark.parametrize("design, gbps, gb", [
    ("gpu/v100", 900, 32), ("gpu/a6000", 768, 48),
    ("gpu/rtx4090", 384 / 8 * 21, 24),            # 384-bit GDDR6X at 21 Gb/s = 1008 GB/s
    ("gpu/mi250x", 3276.8 / 2, 128 / 2),          # 3.2 TB/s, 128 GB per package of 2 GCDs
    ("cpu/xeon_spr", 8 * 4800e6 * 8 / 1e9, 512),  # 8 channels x DDR5-4800 x 8 B = 307.2 GB/s
])
def test_memory_matches_the_spec_sheet(design, gbps, gb):
    m = spec(design).memory
    assert (m.bandwidth_gbps, m.capacity_gb) == (pytest.approx(gbps), gb)


def test_formats_are_the_generations_own():
    assert set(spec("gpu/v100").tensor_core.fma_per_clock) == {"fp16"}
    assert "fp8_e4m3" not in spec("gpu/a6000").tensor_core.fma_per_clock
    assert set(spec("gpu/mi250x").tensor_core.fma_per_clock) == {"fp16", "bf16", "int8"}
    assert set(spec("cpu/xeon_spr").tensor_core.fma_per_clock) == {"bf16", "int8"}


def test_clusters_links_from_the_spec_sheets():
    dgx1 = load_cluster(find_cluster("dgx1")).spec
    assert dgx1.devices == 8 and dgx1.scale_up.bandwidth_gbps == 6 * 25   # 6 NVLink2 links
    assert dgx1.scale_out.bandwidth_gbps == 4 * 100 / 8 / 8               # 4 EDR NICs / 8 GPUs
    dgx2 = load_cluster(find_cluster("dgx2")).spec
    assert dgx2.devices == 16 and dgx2.scale_up.topology == "switch"
    fr = load_cluster(find_cluster("frontier")).spec
    assert fr.devices_per_node == 4 * 2                                   # 4 MI250X x 2 GCDs
    assert fr.scale_out.bandwidth_gbps == 4 * 25 / 8                      # 4 Slingshot NICs
    pkg = load_cluster(find_cluster("mi250x")).spec
    assert pkg.devices == 2 and pkg.scale_up.bandwidth_gbps == 4 * 50     # 4 IF links


@pytest.mark.parametrize("args", [
    ["run", "gpu/v100", "--model", "gpt2-medium"],
    ["run", "gpu/a6000", "--model", "gpt2-medium", "--a-format", "bf16"],
    ["run", "gpu/rtx4090", "--model", "gpt2-medium"],
    ["run", "gpu/mi250x", "--model", "gpt2-medium", "--a-format", "bf16"],
    ["run", "cpu/xeon_spr", "--model", "gpt2-medium", "--a-format", "bf16"],
    ["plan", "dgx1", "--model", "gpt2-medium", "--devices", "8", "--top", "1"],
    ["plan", "dgx2", "--model", "gpt2-medium", "--devices", "16", "--top", "1"],
    ["plan", "frontier", "--model", "gpt2-medium", "--devices", "16", "--top", "1"],
])
def test_commands_run(capsys, args):
    assert main(args) == 0, capsys.readouterr().err


@pytest.mark.parametrize("args, runs", [
    (["run", "gpu/v100", "--model", "gpt2-medium", "--a-format", "bf16"], "fp16"),
    (["run", "gpu/v100", "--model", "gpt2-medium", "--a-format", "fp8_e4m3"], "fp16"),
    (["run", "gpu/a100", "--model", "gpt2-medium", "--a-format", "fp8_e4m3"], "fp16, bf16"),
    (["run", "gpu/mi250x", "--model", "gpt2-medium", "--a-format", "fp8_e4m3"], "fp16, bf16"),
    (["plan", "dgx1", "--model", "gpt2-medium", "--devices", "8", "--a-format", "bf16"],
     "fp16"),
])
def test_a_format_the_device_lacks_is_refused(capsys, args, runs):
    assert main(args) == 2
    err = capsys.readouterr().err
    fmt = args[args.index("--a-format") + 1]
    assert f"--a-format: {fmt}: " in err and f"no {fmt} tensor cores" in err
    assert f"computes in {runs}" in err and "Traceback" not in err
