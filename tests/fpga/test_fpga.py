"""The nm_sparse_fpga unit: sparse MAC counts, fold timing, dense == spatial array, BDWP
pre-generation, feasibility, resources in results, power, configs."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import archsim
from archsim.arch import load_data
from archsim.workloads.errors import ConfigError, MappingError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Conv2d, Gemm, Softmax, Sparsity

PATTERNS = [(1, 4), (2, 4), (1, 8), (2, 8), (4, 8)]


def unit(cfg: dict):
    return load_data(cfg).units[0]


# ---- sparse-operand MAC counts -----------------------------------------------------------
@pytest.mark.parametrize("n, m", PATTERNS)
def test_sparse_gemm_macs_are_exactly_n_over_m(fpga_config, n: int, m: int) -> None:
    u = unit(fpga_config())
    dense = 64 * 48 * 256                       # m x n x k
    op = Gemm(name="g", m=64, n=48, k=256, w_sparsity=Sparsity(n, m))
    e = u.estimate(op)
    assert e.actions[("fpga.pe_macs", "mac")] == dense * n // m
    assert e.actions[("fpga.nm_muxes", "select")] == dense * n // m
    assert e.details["k_compressed"] == 256 * n // m


@pytest.mark.parametrize("n, m", PATTERNS)
def test_sparse_conv_macs_are_exactly_n_over_m(fpga_config, n: int, m: int) -> None:
    u = unit(fpga_config())
    # 2 x 64ch x 8x8, 32 filters 3x3 pad 1: N*K*P*Q*C*R*S = 2*32*8*8*64*9 = 2359296 MACs
    op = Conv2d(name="c", n=2, c=64, h=8, w=8, k=32, r=3, s=3, padding=1,
                w_sparsity=Sparsity(n, m))
    assert u.estimate(op).actions[("fpga.pe_macs", "mac")] == 2359296 * n // m


def test_training_workload_macs(fpga_config) -> None:
    """In a 2:8 training step fwd and bwd_data MACs of prunable layers are 1/4 of dense,
    bwd_weight stays dense (BDWP)."""
    u = unit(fpga_config(rows=16, cols=16))
    wl = archsim.workload("resnet18", phase="train", batch=1).with_sparsity(2, 8)
    for op in wl.ops():
        if not op.is_matrix:
            continue
        macs = u.estimate(op).actions[("fpga.pe_macs", "mac")]
        sp = getattr(op, "w_sparsity", Sparsity())
        if op.pass_ == "bwd_weight":
            assert macs == op.macs()
        elif sp.structured:
            assert macs == op.macs() // 4
        else:                                   # the first conv: C*R*S = 147, not a multiple of 8
            assert op.name.startswith("conv1") and macs == op.macs()


# ---- timing ------------------------------------------------------------------------------
def test_fold_cycles_closed_form(fpga_config) -> None:
    u = unit(fpga_config(rows=8, cols=8))
    # dense 64x32x256: folds ceil(256/8) x ceil(32/8) = 128, each 2*8 + 8 + 64 - 2 = 86
    assert u.estimate(Gemm(name="g", m=64, n=32, k=256)).details["compute_cycles"] == 128 * 86
    # 2:4: k_c = 128 -> folds 16 x 4 = 64
    e = u.estimate(Gemm(name="g", m=64, n=32, k=256, w_sparsity=Sparsity(2, 4)))
    assert e.details["compute_cycles"] == 64 * 86


def test_macs_per_pe_spreads_the_reduction(fpga_config) -> None:
    u = unit(fpga_config(rows=8, cols=8, macs_per_pe=4))
    # K = 256 over 8 rows x 4 lanes: ceil(256/32) = 8 row folds x 4 col folds, each 86 cycles
    assert u.estimate(Gemm(name="g", m=64, n=32, k=256)).details["compute_cycles"] == 32 * 86


def test_activation_buffer_stall(fpga_config) -> None:
    u = unit(fpga_config(rows=8, cols=8, act_width=64))
    # dense: 8 rows x 16 b = 128 b/step over a 64 b buffer -> stall 2:
    # 128 folds x 86 + 128 folds x 64 steps x (2 - 1) = 19200
    e = u.estimate(Gemm(name="g", m=64, n=32, k=256))
    assert (e.details["act_buffer_stall"], e.details["compute_cycles"]) == (2, 19200)
    # 2:8: window 4 -> 8 x 4 x 16 = 512 b -> stall 8; k_c = 64 -> 8 x 4 = 32 folds:
    # 32 x 86 + 32 x 64 x 7 = 17088
    e = u.estimate(Gemm(name="g", m=64, n=32, k=256, w_sparsity=Sparsity(2, 8)))
    assert (e.details["act_buffer_stall"], e.details["compute_cycles"]) == (8, 17088)


def test_unsupported_pattern_runs_dense(fpga_config) -> None:
    u = unit(fpga_config(patterns=("2:4",)))
    e = u.estimate(Gemm(name="g", m=64, n=32, k=256, w_sparsity=Sparsity(2, 8)))
    assert e.actions[("fpga.pe_macs", "mac")] == 64 * 32 * 256
    assert "not supported" in e.mapping


# ---- dense mode == spatial array ---------------------------------------------------------
def _pair(fpga_config, buffer_kib: float, bandwidth_gbps: float, sparse: bool):
    f = unit(fpga_config(rows=8, cols=8, buffer_kib=buffer_kib, bandwidth_gbps=bandwidth_gbps,
                         sparse=sparse, vector_lanes=8))
    s = unit({"name": "sa", "technology": {"node_nm": 16}, "units": [{
        "kind": "spatial_array", "name": "sa", "rows": 8, "cols": 8, "clock_mhz": 100.0,
        "dataflow": "ws", "mac_format": "fp16", "global_buffer_kib": 3 * buffer_kib,
        "vector_lanes": 8,
        "memory": {"bandwidth_gbps": bandwidth_gbps, "tech": "ddr4", "efficiency": 1.0}}]})
    return f, s


OPS = [Gemm(name="g1", m=64, n=32, k=256), Gemm(name="g2", m=1000, n=70, k=33),
       Gemm(name="g3", m=5, n=300, k=1000), Gemm(name="g4", m=2048, n=512, k=1024, batch=2),
       Conv2d(name="c", n=2, c=64, h=14, w=14, k=128, r=3, s=3, padding=1),
       Softmax(name="s", rows=512, cols=384)]


@pytest.mark.parametrize("buffer_kib, bw, sparse", [(256.0, 1e6, True), (4.0, 10.0, False),
                                                    (64.0, 25.0, True)])
def test_dense_mode_equals_spatial_array(fpga_config, buffer_kib, bw, sparse) -> None:
    f, s = _pair(fpga_config, buffer_kib, bw, sparse)
    for op in OPS:
        ef, es = f.estimate(op), s.estimate(op)
        assert ef.cycles == es.cycles, op.name
        assert ef.dram_read_bytes == pytest.approx(es.dram_read_bytes, rel=1e-12), op.name
        assert ef.dram_write_bytes == pytest.approx(es.dram_write_bytes, rel=1e-12), op.name
        if op.is_matrix:
            assert ef.actions[("fpga.pe_macs", "mac")] == es.actions[("sa.mac", "mac")]


def test_best_loop_order_never_slower(fpga_config) -> None:
    sp = unit(fpga_config(buffer_kib=16.0, bandwidth_gbps=20.0))
    best = unit(fpga_config(buffer_kib=16.0, bandwidth_gbps=20.0, loop_order="best"))
    for op in OPS[:5]:
        for w in (Sparsity(), Sparsity(2, 8)):
            o = dataclasses.replace(op, w_sparsity=w)
            assert best.estimate(o).cycles <= sp.estimate(o).cycles


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 3000), n=st.integers(1, 600), kg=st.integers(1, 300),
       pat=st.sampled_from([(0, 0)] + PATTERNS), rows=st.sampled_from([4, 16, 32]),
       p=st.integers(1, 4), order=st.sampled_from(["spatial", "best"]),
       bw=st.sampled_from([5.0, 80.0, 1e5]), width=st.sampled_from([64, 4096]))
def test_never_beats_roofline(m, n, kg, pat, rows, p, order, bw, width) -> None:
    from tests.fpga.conftest import make_config  # noqa: PLC0415

    u = unit(make_config(rows=rows, cols=16, macs_per_pe=p, loop_order=order,
                         bandwidth_gbps=bw, act_width=width, buffer_kib=32.0))
    sp = Sparsity(*pat) if pat[1] else Sparsity()
    op = Gemm(name="g", m=m, n=n, k=8 * kg, w_sparsity=sp)
    e = u.estimate(op)
    assert e.cycles >= u.roofline_cycles(op) - 1e-6
    assert e.utilization <= 1.0 + 1e-12


# ---- BDWP pre-generation -----------------------------------------------------------------
def test_pregeneration_cost(fpga_config) -> None:
    u = unit(fpga_config())
    bwd = Gemm(name="g.bwd_data", m=64, n=32, k=256, pass_="bwd_data",
               w_sparsity=Sparsity(2, 8))
    e = u.estimate(bwd)
    # weights 256 x 32 = 8192 fp16: read 16384 B; write fwd + transposed copies:
    # 2 x 8192 x 2/8 x (2 B + 3 index bits / 8) = 9728 B; generator 8192 / (8 x 16 lanes) = 64
    assert e.details["pregen_bytes"] == 16384 + 9728
    assert e.details["pregen_cycles"] == 64
    assert e.actions[("fpga.pregen", "group")] == 8192 / 8
    fwd = Gemm(name="g", m=64, n=256, k=32, w_sparsity=Sparsity(2, 8))
    assert u.estimate(fwd).details["pregen_bytes"] == 0


def test_pregeneration_overlap_helps(fpga_config) -> None:
    bwd = Gemm(name="g.bwd_data", m=256, n=512, k=512, pass_="bwd_data",
               w_sparsity=Sparsity(2, 8))
    on = unit(fpga_config(bandwidth_gbps=20.0)).estimate(bwd).cycles
    off = unit(fpga_config(bandwidth_gbps=20.0, pregen={"lanes": 16, "overlap": False}))
    assert off.estimate(bwd).cycles > on


# ---- whole training step -----------------------------------------------------------------
def test_training_speedup_bounds() -> None:
    """2:8 speeds a training step up, but never beyond the BDWP bound: fwd and bwd_data at
    N/M, bwd_weight dense -> 3 / (1 + 2 x 2/8) = 2.0; denser patterns gain less."""
    acc = archsim.load("sat_vcu1525")
    wl = archsim.workload("resnet18", phase="train", batch=4)
    dense = archsim.evaluate(acc, wl).latency_s
    s28 = dense / archsim.evaluate(acc, wl.with_sparsity(2, 8)).latency_s
    s24 = dense / archsim.evaluate(acc, wl.with_sparsity(2, 4)).latency_s
    assert 1.0 < s24 < s28 <= 2.0


# ---- feasibility and resources -----------------------------------------------------------
def test_sat_fits_vu9p(shared_dir) -> None:
    import yaml

    acc = archsim.load("sat_vcu1525")
    u = acc.units[0]
    ref = yaml.safe_load((shared_dir / "reference" / "nm_sparse_fpga.yaml").read_text())
    vu9p = ref["vu9p_resources"]
    p = u.spec.part
    assert (p.dsp, p.lut, p.ff, p.bram36, p.uram) == (
        vu9p["dsp48e2"], vu9p["clb_luts"], vu9p["clb_ffs"], vu9p["bram36"], vu9p["uram"])
    res = u.report()["resources"]
    assert res["feasible"] and res["exceeded"] == []
    assert all(v <= u.spec.max_utilization for v in res["utilization"].values())


def test_sat_resource_totals_by_hand() -> None:
    r = archsim.load("sat_vcu1525").units[0].report()["resources"]
    # 1536 fp16 MAC lanes x (1 + 2) DSP + 128 vector lanes x (3 + 2) DSP
    assert r["dsp"] == 1536 * 3 + 128 * 5
    # MACs 1536 x 250, 8:1 muxes 1536 x 16 b x 2, generator 16 x 448, vector 128 x 260,
    # 4 DDR4 controllers x 9000, shell 60000
    assert r["lut"] == 1536 * 250 + 1536 * 32 + 16 * 448 + 128 * 260 + 4 * 9000 + 60000
    # MACs 1536 x 410; PE registers 768 x (2 lanes x 8 (1:8 window) x 16 + 2 x 2 x 19 + 32);
    # generator 16 x 524; vector 128 x 450; controllers 4 x 11000; shell 80000
    assert r["ff"] == (1536 * 410 + 768 * (256 + 76 + 32) + 16 * 524 + 128 * 450 + 44000
                       + 80000)
    assert (r["bram36"], r["uram"]) == (473 + 4 * 25 + 60, 114 + 60)
    assert r["utilization"]["dsp"] == pytest.approx(5248 / 6840, abs=1e-6)


def test_infeasible_design_names_the_resource() -> None:
    acc = archsim.load("sat_vcu1525", ["units[0].rows=64"])
    u = acc.units[0]
    res = u.report()["resources"]
    assert not res["feasible"]
    # 64 x 24 x 2 = 3072 lanes x 3 + 640 = 9856 DSP > 0.8 x 6840 = 5472
    assert "dsp: 9856 needed > 5472 usable at 80%" in res["exceeded"]
    e = u.estimate(Gemm(name="g", m=64, n=64, k=64))
    assert not e.feasible and "dsp: 9856 needed" in e.reason
    with pytest.raises(MappingError, match="dsp: 9856 needed"):
        archsim.evaluate(acc, archsim.gemm_workload(64, 64, 64))


def test_infeasible_bram_named(fpga_config) -> None:
    cfg = fpga_config()
    cfg["units"][0]["out_buffer"] = {"kib": 20000, "width_bits": 72, "memory": "bram"}
    u = unit(cfg)
    # 20000 KiB = 163840000 b at 72 b: depth 2275556 / 512 -> 4445 BRAM36, plus one DDR4
    # controller (25) and the shell (60) = 4530 > 2160
    assert u.fit_problems() == ["bram36: 4530 needed > 2160 available"]


def test_result_carries_resources_and_power() -> None:
    acc = archsim.load("sat_vcu1525")
    res = archsim.evaluate(acc, archsim.gemm_workload(1024, 1024, 1024))
    r = res.extra["resources"]
    assert {"dsp", "lut", "ff", "bram36", "uram"} <= set(r)
    assert set(r["utilization"]) == {"dsp", "lut", "ff", "bram36", "uram"}
    assert '"resources"' in res.to_json()
    u = acc.units[0]
    # energy >= (static + clock-tree power) x latency; area is the resources, not mm2
    floor = (u.spec.part.static_power_w + u.clock_power_w()) * res.latency_s
    assert res.energy_j > floor
    assert res.area_mm2 == 0.0


def test_mac_energy_by_hand() -> None:
    u = archsim.load("sat_vcu1525").units[0]
    comps = {c.name: c for c in u.components()}
    # fp16 MAC with DSP adder: 3 DSP x 2.0 pJ + 0.125 x (250 LUT x 0.12 + 410 FF x 0.05)
    assert comps["sat.pe_macs"].attrs["energy_pj"]["mac"] == pytest.approx(6.0 + 0.125 * 50.5)


# ---- configs -----------------------------------------------------------------------------
@pytest.mark.parametrize("edit, where", [
    (lambda u: u["sparse"].update(patterns=["3:2"]), "sparse.patterns[0]"),
    (lambda u: u.update(mac_format="fp32"), "mac_format"),
    (lambda u: u["out_buffer"].update(ports=3), "out_buffer.ports"),
    (lambda u: u.update(adder="carry"), "adder"),
    (lambda u: u.update(colz=3), "colz"),
])
def test_bad_config_names_the_key(fpga_config, edit, where) -> None:
    cfg = fpga_config()
    edit(cfg["units"][0])
    with pytest.raises(ConfigError) as exc:
        load_data(cfg, "t.yaml")
    assert any(p.path == f"units[0].{where}" for p in exc.value.problems), exc.value.problems


def test_int8_design_runs_int8_and_refuses_fp16(fpga_config) -> None:
    u = unit(fpga_config(mac_format="int8"))
    i8 = FORMATS["int8"]
    assert u.estimate(Gemm(name="g", m=8, n=8, k=8, a_format=i8, w_format=i8,
                           acc_format=FORMATS["int32"])).feasible
    assert "wider" in u.supports(Gemm(name="g", m=8, n=8, k=8))
