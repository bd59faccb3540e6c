"""DRAM PIM family (kind: dram_pim): peaks, timing gates, estimate vs command-level
simulation, roofline property, channel scaling, whole-GPT decode, bad configs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import archsim
from archsim.arch.pim.decode import decode_tokens
from archsim.sim import dram_kernel as K
from archsim.sim.dram import DramState
from archsim.sim.dram_presets import COMMANDS
from archsim.sim.errors import DramConfigError
from archsim.workloads.errors import ConfigError
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Gemm

BF = FORMATS["bf16"]


def unit(name: str = "pim_gpt", *overrides: str):
    return archsim.load(name, overrides).units[0]


def gemv(n: int, k: int, m: int = 1, batch: int = 1, weight: bool = True,
         role: str = "") -> Gemm:
    return Gemm(name="g", m=m, n=n, k=k, batch=batch, b_is_weight=weight, role=role,
                a_format=BF, w_format=BF)


# ---- device peaks emerge from the organisation ------------------------------------------
def test_aim_like_peak_is_one_tflops_per_two_channels():
    # pim.yaml gddr6_aim.check: 2 ch x 16 banks x 16 MACs x 2 FLOP x 1 GHz = 1.024 TFLOPS
    assert unit("aim_like").peak_flops() == pytest.approx(2 * 16 * 16 * 2 * 1e9, rel=1e-9)


def test_hbm_pim_like_peak_is_1_2_tflops_per_stack():
    # pim.yaml hbm2_pim.check: 4 dies x 32 units x 16 lanes x 2 FLOP x 0.3 GHz = 1.23 TFLOPS;
    # here the PCU clock is CK/4 with CK = 1/833 ps.
    u = unit("hbm_pim_like")
    assert u.latency("MACAB", "MACAB") == 4
    assert u.peak_flops() == pytest.approx(16 * 8 * 16 * 2 / (4 * 833e-12), rel=1e-9)
    assert u.peak_flops() / 1e12 == pytest.approx(1.23, rel=0.01)


# ---- timing gates of the PIM commands (blocked at t-1, allowed at t) ----------------------
GDDR6 = {"nRCDRD": 26, "nRAS": 53, "nRP": 26, "nCCDL": 6, "nCWL": 6, "nBL": 2, "nRTP": 4,
         "nRC": 79, "nRFC": 210}  # sim.dram_presets GDDR6 (AiM simulator values, tag A)


def _gate(state: DramState, cmd: str, t: int, row: int = 0) -> None:
    with pytest.raises(DramConfigError):
        state.issue(cmd, t - 1, 0, row=row)
    state.issue(cmd, t, 0, row=row)


def test_pim_command_gates_from_the_preset_table():
    u = unit()
    s = DramState(u.dram)
    T = GDDR6
    s.issue("ACTAB", 0, 0, row=3)
    _gate(s, "MACAB", T["nRCDRD"], row=3)                        # ACTAB -> MACAB: nRCDRD
    t_mac = T["nRCDRD"]
    _gate(s, "RDMAC", t_mac + T["nCCDL"])                        # MACAB -> RDMAC: nCCDL
    _gate(s, "PREA", max(T["nRAS"], t_mac + T["nRTP"]))          # ACTAB -> PREA: nRAS
    _gate(s, "ACTAB", max(T["nRC"], T["nRAS"] + T["nRP"]), row=4)  # PREA -> ACTAB: nRP
    t_act = T["nRAS"] + T["nRP"]
    s.issue("WRGB", t_act + 1, 0)
    _gate(s, "MACAB", max(t_act + 1 + T["nCWL"] + T["nBL"], t_act + T["nRCDRD"]), row=4)


def test_mac_interval_is_the_processing_unit_cycle():
    # the resolved table's MACAB->MACAB row is ceil(1/mac_clock_ratio): 1 tCK for AiM
    for name, gap in (("pim_gpt", 1), ("hbm_pim_like", 4)):
        u = unit(name)
        inst, _ = u.new_state()
        act, mac = COMMANDS.index("ACTAB"), COMMANDS.index("MACAB")
        K.issue_inst(inst, act, 0, 0, 0, 0, 0, 0)
        t0 = int(K.earliest_inst(inst, mac, 0, 0, 0, 0))
        assert t0 == u.dram.timing["nRCDRD"]
        K.issue_inst(inst, mac, 0, 0, 0, 0, 0, t0)
        assert K.earliest_inst(inst, mac, 0, 0, 0, 0) == t0 + gap


def test_refresh_blocks_activation_for_nrfc():
    s = DramState(unit().dram)
    s.issue("REF", 0, 0)
    _gate(s, "ACTAB", GDDR6["nRFC"], row=0)


# ---- estimate vs command-level simulation -----------------------------------------------
@pytest.mark.parametrize("n,k,m", [(4800, 1600, 1), (1600, 6400, 1), (3072, 768, 1),
                                   (1024, 1024, 4), (50257, 768, 1)])
def test_estimate_agrees_with_simulation_for_weight_gemv(n, k, m):
    # tolerance 10%: the closed form spreads RDMAC gaps evenly over rows and derates refresh
    # on average; the simulation is the reference.
    u = unit()
    op = gemv(n, k, m)
    est, sim = u.estimate(op).cycles, u.simulate(op)
    assert est == pytest.approx(sim, rel=0.10)


@pytest.mark.parametrize("role,n,k", [("qk", 129, 64), ("av", 64, 129), ("qk", 1025, 64)])
def test_estimate_bounds_simulation_for_attention(role, n, k):
    # the KV-append closed form ignores overlap between append batches: conservative, 35%
    u = unit()
    op = gemv(n, k, batch=25, weight=False, role=role)
    est, sim = u.estimate(op).cycles, u.simulate(op)
    assert sim <= est <= 1.35 * sim


# ---- physics: never faster than the internal bank bandwidth ------------------------------
def test_latency_never_below_weight_bytes_over_internal_bandwidth():
    rng = np.random.default_rng(7)
    for name in ("pim_gpt", "aim_like", "hbm_pim_like"):
        u = unit(name)
        bw = (u.spec.channels * u.units_per_channel * u.spec.mac_lanes * 2
              / u.latency("MACAB", "MACAB"))            # bytes per tCK, bf16/fp16
        for _ in range(12):
            n, k = int(rng.integers(1, 5000)), int(rng.integers(1, 5000))
            m = int(rng.integers(1, 3))
            op = gemv(n, k, m)
            bound = m * n * k * 2 / bw
            assert u.simulate(op) >= bound
            assert u.estimate(op).cycles >= u.roofline_cycles(op) - 1e-9


def test_row_hit_rate_is_63_of_64_for_a_filled_row_stream():
    # 2 KB row / (16 lanes x 2 B) = 64 MAC commands per activation; 4096x4096 over 8 x 16
    # banks: 32 neurons x 256 MACs per bank = 8192 MACs = 128 rows exactly
    e = unit().estimate(gemv(4096, 4096))
    assert e.details["actab"] == 8 * 128
    assert e.details["row_hit_rate"] == pytest.approx(63 / 64)


def test_channel_scaling_is_near_linear():
    op = gemv(8192, 4096)
    cyc = {c: unit("pim_gpt", f"units[0].channels={c}").simulate(op) for c in (1, 2, 4, 8)}
    for c in (2, 4, 8):
        assert cyc[1] / cyc[c] == pytest.approx(c, rel=0.05)


def test_refresh_costs_about_trfc_over_trefi():
    op = gemv(8192, 4096)
    on = unit().simulate(op)
    off = unit("pim_gpt", "units[0].refresh=false").simulate(op)
    # each REF: nRFC plus re-activation of the interrupted row, every nREFI = 3333 tCK
    lo = 1 / (1 - 210 / 3333)
    assert lo * 0.98 <= on / off <= 1 / (1 - (210 + 26 + 26 + 4) / 3333) * 1.02


# ---- whole-GPT decode -------------------------------------------------------------------
def test_evaluate_cycle_fidelity_runs_a_gpt_decode():
    acc = archsim.load("pim_gpt")
    wl = archsim.workload("gpt2-small", phase="decode", batch=1, context=128,
                          a_format="bf16", w_format="bf16")
    r = archsim.evaluate(acc, wl, fidelity="cycle")
    weights = sum(op.weight_bytes() for op in wl.ops() if op.is_matrix)
    internal = acc.units[0].internal_bytes_per_cycle() * acc.units[0].clock_hz
    assert r.latency_s >= weights / internal
    assert r.energy_j > 0 and r.area_mm2 > 0
    assert r.extra["pim"]["peak_tflops"] == pytest.approx(4.096)


def test_decode_tokens_grows_the_kv_cache():
    rs = decode_tokens(archsim.load("pim_gpt"), "gpt2-small", 3, 64)
    assert [r.context for r in rs] == [64, 65, 66]
    # one more key/value per token: MAC commands never fall (ceil to 16 lanes / 16 banks)
    assert all(b.macab >= a.macab for a, b in zip(rs, rs[1:]))
    longer = decode_tokens(archsim.load("pim_gpt"), "gpt2-small", 1, 256)[0]
    assert longer.macab > rs[-1].macab and longer.latency_s > rs[-1].latency_s
    assert all(0.97 < r.row_hit_rate < 0.99 for r in rs)
    assert all(r.latency_s == pytest.approx(r.matrix_s + r.asic_s) for r in rs)


# ---- bad input --------------------------------------------------------------------------
def test_bad_config_names_the_key():
    with pytest.raises(ConfigError) as e:
        archsim.load("pim_gpt", ["units[0].banks_per_unit=3"])
    assert "banks_per_unit" in str(e.value)
    with pytest.raises(ConfigError) as e:
        archsim.load("pim_gpt", ["units[0].dram_preset=GDDR7"])
    assert "dram_preset" in str(e.value)
    with pytest.raises(ConfigError) as e:
        archsim.load("pim_gpt", ["units[0].mac_clock_ratio=0"])
    assert "mac_clock_ratio" in str(e.value)


def test_unsupported_ops_are_infeasible_not_errors():
    u = unit()
    op = Gemm(name="g", m=1, n=8, k=8, a_format=FORMATS["fp32"], w_format=FORMATS["fp32"])
    e = u.estimate(op)
    assert not e.feasible and "fp32" in e.reason
    assert math.isfinite(u.roofline_cycles(gemv(8, 8)))
