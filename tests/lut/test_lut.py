"""LUT tensor-core family (``kind: lut_tensor_core``): formulas, timing properties, area
against the LUT Tensor Core paper (shared/reference/lut_tensor_core.yaml, Table 1/2)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from archsim import arch
from archsim.arch import lut as L
from archsim.workloads.errors import ConfigError
from archsim.workloads.formats import get_format
from archsim.workloads.ops import Gemm

ROOT = Path(__file__).resolve().parents[2]
LUT4X = ROOT / "configs" / "lut" / "a100_lut4x.yaml"
LUT8X = ROOT / "configs" / "lut" / "a100_lut8x.yaml"
A100 = ROOT / "configs" / "gpu" / "a100.yaml"


@cache
def unit(path: Path) -> L.LutTensorCoreGpu:
    u = arch.load(path).units[0]
    assert isinstance(u, L.LutTensorCoreGpu)
    return u


def gemm(m: int, n: int = 3200, k: int = 3200, a: str = "int8", w: str = "ternary") -> Gemm:
    return Gemm(name="g", m=m, n=n, k=k, a_format=get_format(a), w_format=get_format(w),
                acc_format=get_format("int32" if a == "int8" else "fp32"))


# ---- formulas -----------------------------------------------------------------------
def test_table_and_storage_formulas():
    assert L.table_entries(4) == 8                        # 2^(K-1)
    assert L.table_storage_bits(2, 4, 8) == 2 * 8 * 8      # M x 2^(K-1) x LUT_BIT
    assert L.table_storage_bits(2, 4, 16) == 256
    assert L.weight_storage_bits(4, 64, 2) == 512          # K x N x W_BIT
    lut = unit(LUT4X).spec.lut
    assert (lut.tile_m, lut.tile_n, lut.k) == (2, 64, 4) and lut.tile_macs == 512


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_symmetrisation_halves_the_table(k):
    assert L.table_entries(k, symmetric=False) == 2 ** k
    assert L.table_entries(k, symmetric=True) * 2 == L.table_entries(k, symmetric=False)
    assert L.table_storage_bits(2, k, 8, True) * 2 == L.table_storage_bits(2, k, 8, False)


def test_symmetric_table_is_smaller_in_area():
    u = unit(LUT4X)
    import dataclasses
    asym = L.LutTensorCoreGpu("gpu", dataclasses.replace(
        u.spec, lut=dataclasses.replace(u.spec.lut, symmetric=False)))
    a_sym, a_asym = u.lut_area_breakdown_mm2(), asym.lut_area_breakdown_mm2()
    assert a_asym["lut_table"] > 1.9 * a_sym["lut_table"]
    assert a_asym["lut_mux"] > 2.0 * a_sym["lut_mux"]


# ---- timing -------------------------------------------------------------------------
@pytest.mark.parametrize("w,fmt", [(1, "int1"), (2, "int2"), (3, "int3"), (4, "int4")])
def test_bit_serial_passes_and_peak(w, fmt):
    u = unit(LUT4X)
    op = gemm(4096, 4096, 4096, w=fmt)
    assert u.lut_passes(op) == w
    # peak MACs/cycle is the 1-bit lookup rate divided by W
    assert u.peak_macs_per_cycle(op) == pytest.approx(108 * 4 * 4 * 512 / w)
    e = u.estimate(op, "lut")
    assert e.details["passes"] == w


def test_bit_serial_cycles_scale_with_weight_bits():
    u = unit(LUT4X)
    est = [u.estimate(gemm(8192, 8192, 8192, w=f"int{w}"), "lut") for w in (1, 2, 3, 4)]
    # LUT-unit busy cycles (lookups per unit) are exactly proportional to W
    look = [e.actions[("gpu.lut_table", "lookup")] for e in est]
    for w, x in zip((1, 2, 3, 4), look):
        assert x == pytest.approx(w * look[0])
    busy = [x / (u.n_tiles() * 2 * 64) for x in look]          # cycles of one LUT unit
    assert busy[0] == pytest.approx(8192 ** 3 / (4 * 2 * 64) / u.n_tiles(), rel=0.05)
    # latency is non-decreasing in W (the L2->SM feed hides part of it at W = 1, 2)
    cyc = [e.cycles for e in est]
    assert cyc == sorted(cyc) and cyc[3] > 1.3 * cyc[0]


def test_paper_peaks():
    assert unit(LUT4X).peak_tops(2) == pytest.approx(1248, rel=0.01)   # Table 1, W_INT2
    assert unit(LUT8X).peak_tops(2) == pytest.approx(2496, rel=0.01)


@pytest.mark.parametrize("m", [1, 16, 256, 1024, 4096])
@pytest.mark.parametrize("w", ["int1", "ternary", "int4"])
@pytest.mark.parametrize("a", ["int8", "fp16", "fp8_e4m3"])
def test_roofline_never_beaten(m, w, a):
    for p in (LUT4X, LUT8X):
        u = unit(p)
        op = gemm(m, a=a, w=w)
        for mp in (None, "lut_fused", "lut_unfused"):
            e = u.estimate(op, mp)
            assert e.feasible
            assert e.cycles >= u.roofline_cycles(op) - 1


def test_decode_is_memory_bound_at_weight_width():
    u = unit(LUT4X)
    e2 = u.estimate(gemm(1, 8192, 8192, w="int2"), "lut")
    e4 = u.estimate(gemm(1, 8192, 8192, w="int4"), "lut")
    assert e2.bound == "memory"
    assert e4.dram_read_bytes > 1.8 * e2.dram_read_bytes    # weights stream at W bits


def test_unfused_precompute_costs_more():
    u = unit(LUT4X)
    op = gemm(1024)
    f, nf = u.estimate(op, "lut_fused"), u.estimate(op, "lut_unfused")
    assert nf.cycles > f.cycles
    assert f.details["precompute_s"] < 0.10 * f.latency_s      # fused: < 10 % (paper: 2.5 %)


def test_non_lut_ops_fall_back_to_the_mac_tensor_cores():
    u = unit(LUT4X)
    op = gemm(1024, a="fp16", w="fp16")
    assert u.lut_passes(op) is None
    assert u.estimate(op).dataflow.startswith("gemm")
    assert not u.estimate(op, "lut").feasible
    assert not u.estimate(gemm(64, w="int8"), "lut").feasible   # > max_weight_bits


def test_components_cover_actions():
    u = unit(LUT4X)
    names = {c.name for c in u.components()}
    for key in u.estimate(gemm(512), "lut").actions:
        assert key[0] in names


# ---- configs ------------------------------------------------------------------------
def test_negative_config(tmp_path):
    text = LUT4X.read_text().replace("array_scale: 4", "array_scale: 3").replace(
        "entry_format: int8", "entry_format: int4")
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as ei:
        arch.load(p)
    msg = str(ei.value)
    assert "array_scale" in msg and "entry_format" in msg


def test_missing_lut_block_is_reported(tmp_path):
    lines = [ln for ln in LUT4X.read_text().splitlines(keepends=True)]
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "lut:")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("      "))
    p = tmp_path / "nolut.yaml"
    p.write_text("".join(lines[:start] + lines[end:]))
    with pytest.raises(ConfigError, match="lut"):
        arch.load(p)


# ---- area vs paper Table 1 / Table 2 (28 nm) --------------------------------------------
@pytest.mark.parametrize("path,area,density", [(LUT4X, 0.187, 61.84), (LUT8X, 0.373, 61.95)])
def test_lut_area_and_density_vs_table1(path, area, density):
    u = unit(path)
    assert u.tc_area_per_sm_mm2() == pytest.approx(area, rel=0.15)
    assert u.compute_density(2) == pytest.approx(density, rel=0.15)


def test_lut_tile_area_vs_table2():
    u = unit(LUT4X)
    tile_um2 = sum(u.lut_area_breakdown_mm2().values()) / u.n_tiles() * 1e6
    assert tile_um2 == pytest.approx(11991.29, rel=0.15)   # Table 2 'LUT TC' (um^2)


def test_a100_int8_mac_array_area():
    # structural DP16 model (m8n4k16) within 15% of Table 1's 0.312 mm^2/SM; the
    # density (17.73) and the FP16 row are not reached (see docs/lut.md)
    g = arch.load(A100).units[0]
    assert L.mac_dp_area_per_sm_mm2(g.spec, "int8", 16) == pytest.approx(0.312, rel=0.15)


def test_energy_report_runs():
    from archsim import energy
    u = unit(LUT4X)
    e = u.estimate(gemm(1024), "lut")
    rep = energy.evaluate(u.components(), e.actions, e.latency_s, energy.Technology(node_nm=7))
    assert rep.total_j > 0


# ---- BitNet b1.58 3B vs Table 1 (only the figures honestly reached; all in docs/lut.md) ----
@cache
def prefill_ms(cfg: str) -> float:
    import archsim
    path, fk = {"fp16": (A100, {"a_format": "fp16", "w_format": "fp16"}), "int8": (A100, {}),
                "lut4x": (LUT4X, {}), "lut8x": (LUT8X, {})}[cfg]
    wl = archsim.workload("bitnet-b1.58-3b", phase="prefill", batch=1, seq=2048, **fk)
    return archsim.evaluate(archsim.load(path), wl).latency_s * 1e3


def test_bitnet_prefill_reached_figures():
    assert prefill_ms("fp16") / prefill_ms("int8") == pytest.approx(106.71 / 67.06, rel=0.15)
    assert prefill_ms("lut4x") == pytest.approx(42.49, rel=0.25)
    assert prefill_ms("lut8x") == pytest.approx(38.02, rel=0.25)
    assert prefill_ms("lut8x") <= prefill_ms("lut4x") < prefill_ms("int8")
