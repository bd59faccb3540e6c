"""DRAM PIM: golden reference workloads and validation. DRAM PIM validation: device peaks and the PIM-GPT reproduction against the T4 model.

GPU baseline = ``archsim.evaluate(load('gpu/t4'), workload(model, 'decode', context))``
plus a framework overhead per kernel (PyTorch eager dispatch, which PIM-GPT's GPU numbers
include and our T4 model's 4 us launch overhead does not): ``FRAMEWORK_S_PER_KERNEL`` per
op, during which the GPU draws its static power.
"""

from __future__ import annotations

from typing import Any

from archsim.arch.pim.unit import DramPim
from archsim.arch.reference import (
    Comparison,
    EvaluationAPI,
    Gap,
    checks,
    first_unit,
    load_reference,
    reference_workloads,
)

reference_workloads("dram_pim", {
    "gpt2_small_decode_ctx128": {"model": "gpt2-small", "phase": "decode", "batch": 1, "context": 128, "a_format": "bf16", "w_format": "bf16"},
    "gpt2_xl_decode_ctx128": {"model": "gpt2-xl", "phase": "decode", "batch": 1, "context": 128, "a_format": "bf16", "w_format": "bf16"},
})


__all__ = ["FRAMEWORK_S_PER_KERNEL", "PIM_GPT_MODELS", "gpu_token", "pim_vs_gpu"]

#: PyTorch eager per-op CPU overhead (dispatcher + Python module call), tag C: ~10 us per
#: op (H. He, "Making Deep Learning Go Brrrr From First Principles", 2022: overhead-bound
#: PyTorch runs ~100k ops/s). Kernels counted = our ops (HF GPT-2 launches more: GELU-tanh,
#: split/merge heads, masking), so this undercounts the GPU's time.
FRAMEWORK_S_PER_KERNEL = 10e-6
PIM_GPT_MODELS = ("gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl",
                  "gpt3-small", "gpt3-medium", "gpt3-large", "gpt3-xl")


def gpu_token(archsim: EvaluationAPI, model: str, context: int) -> tuple[float, float]:
    """(latency_s, energy_j) of one decode token on the T4 model + framework overhead,
    evaluated through ``archsim`` (the evaluation API)."""

    acc = archsim.load("gpu/t4")
    wl = archsim.workload(model, phase="decode", batch=1, context=context)
    r = archsim.evaluate(acc, wl)
    n_kernels = len(r.ops)
    over = n_kernels * FRAMEWORK_S_PER_KERNEL
    static_w = float(acc.units[0].spec.static_power_w)
    return r.latency_s + over, r.energy_j + over * static_w


def pim_vs_gpu(archsim: EvaluationAPI, model: str, context: int = 128, n_tokens: int = 1,
               design: str = "pim_gpt") -> dict[str, Any]:
    """Per-token PIM (command level) and GPU latency/energy, speedup, energy efficiency,
    evaluated through ``archsim`` (the evaluation API)."""
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.arch.pim.decode import decode_tokens

    rs = decode_tokens(archsim.load(design), model, n_tokens, context)
    lat = sum(r.latency_s for r in rs) / len(rs)
    en = sum(r.energy_j for r in rs) / len(rs)
    g_lat, g_en = gpu_token(archsim, model, context)
    return {"model": model, "pim_latency_s": lat, "pim_energy_j": en, "gpu_latency_s": g_lat,
            "gpu_energy_j": g_en, "speedup": g_lat / lat, "energy_efficiency": g_en / en,
            "row_hit_rate": rs[-1].row_hit_rate, "asic_share": rs[-1].asic_s / rs[-1].latency_s,
            "commands": rs[-1].commands, "wall_s": rs[-1].wall_s}


@checks("pim")
def _pim(archsim: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """PIM device peaks (pim.yaml) and PIM-GPT ranges (tag A) on pim_gpt vs the T4 model."""

    ref = load_reference("pim.yaml")
    comps: list[Comparison] = []
    gaps: list[Gap] = []
    aim = first_unit(archsim.load("aim_like"), DramPim)
    comps.append(Comparison("pim", "AiM peak (2 channels)", "pim.yaml gddr6_aim.check", "D",
                            1.02, aim.peak_flops() / 1e12, "TFLOP/s", 0.02,
                            "arithmetic check; rounding of 1.024", design="aim_like"))
    hbm = first_unit(archsim.load("hbm_pim_like"), DramPim)
    comps.append(Comparison("pim", "HBM-PIM peak per stack", "pim.yaml hbm2_pim.check", "D",
                            1.23, hbm.peak_flops() / 1e12, "TFLOP/s", 0.02,
                            "arithmetic check; 833 ps tCK rounding", design="hbm_pim_like"))
    res = ref["pim_gpt"]["results"]
    rows = [pim_vs_gpu(archsim, m) for m in PIM_GPT_MODELS]
    lo, hi = res["speedup_vs_gpu"]["range"]
    elo, ehi = res["energy_efficiency_vs_gpu"]["range"]
    for r in rows:
        # Not reproduced (see docs/pim.md): our T4 baseline is an efficient bandwidth-bound
        # GPU model; the published factors imply a GPU step 3-10x slower than it.
        sp, ee = r["speedup"], r["energy_efficiency"]
        if not lo <= sp <= hi:
            gaps.append(Gap("pim", f"{r['model']} decode speedup vs T4 ({lo}-{hi}x)",
                            f"ours {sp:.1f}x (PIM {r['pim_latency_s'] * 1e6:.0f} us, T4 model "
                            f"+ framework {r['gpu_latency_s'] * 1e3:.2f} ms): the published "
                            f"GPU baseline (HF eager on T4) is slower than our T4 model"))
        if not elo <= ee <= ehi:
            gaps.append(Gap("pim", f"{r['model']} decode energy efficiency vs T4 ({elo}-{ehi}x)",
                            f"ours {ee:.1f}x (PIM {r['pim_energy_j'] * 1e3:.2f} mJ, T4 "
                            f"{r['gpu_energy_j'] * 1e3:.0f} mJ): GPU baseline as above; PIM "
                            f"internal read energy 1 pJ/bit is tag C"))
    comps.append(Comparison("pim", "row-hit rate (GPT-2 XL decode)", "pim.yaml pim_gpt.results."
                            "row_hit_rate", "C", res["row_hit_rate"]["value"],
                            rows[3]["row_hit_rate"], "", 0.02,
                            "63/64 MAC commands per activation by construction", design="pim_gpt"))
    comps.append(Comparison("pim", "non-VMM share of latency, GPT-3 XL", "pim.yaml pim_gpt."
                            "results.non_vmm_share_of_latency_gpt3_xl", "C",
                            res["non_vmm_share_of_latency_gpt3_xl"]["value"],
                            rows[7]["asic_share"], "", 0.5,
                            "ASIC lane count assumed (tag C, one lane per bank unit)",
                            design="pim_gpt"))
    gaps.append(Gap("pim", "speed-up vs CPU (631-1074x)", "no Xeon Gold 6154 model"))
    comps.append(_asic_clock_check(archsim))
    return comps, gaps


def _asic_clock_check(archsim: EvaluationAPI) -> Comparison:
    """PIM-GPT: slowing the ASIC from 1 GHz to 100 MHz costs at most ~20% latency. Ours:
    the worst slowdown over the eight GPT models (analytical, decode, context 128)."""

    base = archsim.load("pim_gpt")
    slow = archsim.load("pim_gpt", ["units[0].asic.clock_mhz=100"])
    worst = 0.0
    for model in ("gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-small",
                  "gpt3-medium", "gpt3-large", "gpt3-xl"):
        wl = archsim.workload(model, phase="decode", batch=1, context=128, a_format="bf16",
                              w_format="bf16")
        worst = max(worst, archsim.evaluate(slow, wl).latency_s
                    / archsim.evaluate(base, wl).latency_s - 1.0)
    return Comparison("pim", "latency increase, ASIC 1 GHz -> 100 MHz (worst of 8 GPTs)",
                      "pim.yaml pim_gpt.results.asic_clock_1ghz_to_100mhz", "C", 0.0, worst,
                      "fraction", 0.25, "'at most ~20%' (secondary summary); ASIC lane count "
                      "assumed (tag C)", design="pim_gpt", reference_high=0.20)
