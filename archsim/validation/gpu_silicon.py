"""Validation family ``gpu_silicon``: the H100 model against measured silicon.

Data: ``tests/data/silicon/h100_heldout.jsonl`` — the rows of
``shared/reference/silicon/h100.jsonl`` (tag M; how each was measured: ``SOURCE.md`` next to
it) that ``configs/gpu/h100.yaml`` was *not* fitted on (the fit used
``h100_calibration.jsonl``: idle power, the bf16 GEMM 4096^3 / 16384^3 and 1 GiB copy energy
rows, two int8 GEMMs, ResNet-50 batch 1 eager wall time, the 65536 x 4096 softmax). Registered by
``archsim.validation.core`` (imports every module of this package).
"""

from __future__ import annotations

from pathlib import Path

from archsim import kernel_tables, silicon
from archsim.api import load
from archsim.arch.pim.reference import pim_vs_gpu
from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks
from archsim.validation import load_reference, reference_dir

_DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "silicon"
_SRC = "silicon/h100.jsonl (held out)"
_SRC_2026 = "tests/data/silicon/h100_2026-11-26.jsonl (our re-measurement)"


def _remeasured_kernel_ms() -> dict[tuple[str, str], float]:
    """Profiler kernel sums of the whole steps in our 2026-11-26 re-measurement, keyed like
    :func:`archsim.silicon.model_rows` labels them ((kind, "model batch N"))."""
    path = _DATA / "h100_2026-11-26.jsonl"
    if not path.exists():
        return {}
    return {(r.kind, f"{r.data.get('model')} batch {r.data.get('batch')}"):
            float(r.data["kernel_ms"]) for r in silicon.load_rows(path)
            if r.kind in ("train_step", "cnn_train") and "kernel_ms" in r.data}


@checks("gpu_silicon")
def _gpu_silicon(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """Per kernel class median |error|, board energy, sustained clock, whole models."""

    acc = load("gpu/h100")
    unit = acc.units[0]
    rows = silicon.load_rows(_DATA / "h100_heldout.jsonl")
    comps: list[Comparison] = []
    gaps: list[Gap] = []
    for cls, sc in sorted(silicon.score(unit, rows).items()):
        comps.append(Comparison(
            "gpu_silicon", f"{cls}: 1 + median |latency error| ({len(sc.errors)} kernels, "
            f"worst {sc.worst_abs:.0%})", _SRC, "M", 1.0, 1.0 + sc.median_abs, "ratio", 0.10,
            "issue 16 target: class median within 10%", design="h100"))
    for r in rows:
        d = r.data
        if r.kind != "energy" or silicon.row_op(d) is None:
            continue
        pred = silicon.energy_prediction(acc, d)
        assert pred is not None
        mj, _, mhz = pred
        lab = silicon._label(d)
        comps.append(Comparison("gpu_silicon", f"board energy per call, {lab}", _SRC, "M",
                                float(d["mj_per_call"]), mj, "mJ", 0.15,
                                "issue 16 target: energy per call within 15%", design="h100"))
        comps.append(Comparison("gpu_silicon", f"sustained SM clock, {lab}", _SRC, "M",
                                float(d["sm_mhz"]), mhz, "MHz", 0.10,
                                "NVML clock read at the end of a ~4 s loop", design="h100"))
    remeasured = _remeasured_kernel_ms()
    for m in silicon.model_rows(acc, rows):
        e_row = next((r.data for r in rows if r.kind == "energy" and r.data.get("op") ==
                      m["kind"] and f"{r.data.get('model')} batch {r.data.get('batch')}" ==
                      m["label"]), None)
        if e_row is not None:
            meas = float(e_row["mj_per_call"]) / 1e3
            gaps.append(Gap(
                "gpu_silicon", f"{m['kind']} {m['label']}: board energy",
                f"{m['wall_j']:.1f} J predicted over the wall time ({m['device_j']:.1f} J in "
                f"kernels + the static power while the GPU waits on the host) vs {meas:.1f} J "
                f"measured ({m['wall_j'] / meas - 1:+.0%}). The board drew {e_row['avg_w']:.0f} "
                f"W at {e_row['sm_mhz']:.0f} MHz for the whole step, so the GPU was busy for "
                f"most of it: the predicted kernel time ({m['device_ms']:.1f} ms of "
                f"{m['measured_ms']:.1f}) still misses kernels, and their energy with them"))
        kernel_ms, src = m["measured_kernel_ms"], _SRC
        if kernel_ms is None and (m["kind"], m["label"]) in remeasured:
            kernel_ms, src = remeasured[(m["kind"], m["label"])], _SRC_2026
        if kernel_ms is not None:
            comps.append(Comparison(
                "gpu_silicon", f"{m['kind']} {m['label']} kernel time (profiler sum)", src,
                "M", kernel_ms, m["device_ms"], "ms", 0.25,
                "issue 16: whole-model class within 25%; the device time alone, without the "
                "host", design="h100"))
        how = (" (HF, kernels eager_amp)" if m["kind"] == "train_step" else "")
        name = f"{m['kind']} {m['label']} wall time (eager){how}"
        wall_err = m["wall_ms"] / m["measured_ms"] - 1.0
        dev_err = m["device_ms"] / kernel_ms - 1.0 if kernel_ms else 0.0
        if abs(wall_err) > 0.25 and dev_err < -0.10:
            # the launch queue lets the host run ahead, so the wall follows the device time:
            # a wall error the profiler attributes to missing kernels is that gap, not a
            # host-model error (a host term tuned to close it would hide the kernels)
            gaps.append(Gap("gpu_silicon", name,
                            f"{m['wall_ms']:.1f} ms predicted vs {m['measured_ms']:.1f} ms "
                            f"measured ({wall_err:+.0%}): the GPU is busy "
                            f"{kernel_ms:.1f} ms of the step (profiler sum, {src}) and the "
                            f"model's kernels take {m['device_ms']:.1f} ms ({dev_err:+.0%}); "
                            "with the device time short, the launch queue has nothing to "
                            "wait behind. The missing kernels: docs/gpu.md, training step"))
        else:
            comps.append(Comparison("gpu_silicon", name, _SRC, "M", m["measured_ms"],
                                    m["wall_ms"], "ms", 0.25,
                                    "issue 16: whole-model class within 25%", design="h100"))
    gaps += _kernel_table_gap(unit)
    gaps += _paper_baselines(api)
    return comps, gaps


#: Every how many rows of kernels_h100/gemm.csv.gz the gap below scores (~960 check rows).
_KERNEL_STRIDE = 37


def _kernel_table_gap(unit: object) -> list[Gap]:
    """The vLLM GEMM classes of ``kernels_h100/gemm.csv.gz`` (back to back), check half (K
    not a power of two; ``launch_b2b_us`` was fitted on the other half): the class medians
    against the issue's 8 % target (small M above it), reported as a gap."""
    path = reference_dir() / "kernels_h100" / "gemm.csv.gz"
    if not path.exists():
        return []
    rows = [r for r in silicon.load_rows(path)[::_KERNEL_STRIDE]
            if kernel_tables.shape_half(r.data) == "check"]
    parts = [f"{c} {s.median_abs:.1%} ({len(s.errors)} rows, median signed "
             f"{sorted(s.errors)[len(s.errors) // 2]:+.1%})"
             for c, s in sorted(silicon.score(unit, rows).items())]
    return [Gap("gpu_silicon", "kernels_h100 vLLM GEMMs, back to back (check half: K not a "
                "power of two; median |error| per class, target 8 %)",
                "; ".join(parts) + ". Fitted on the other half: launch_b2b_us (the "
                "back-to-back floor), the per-token quantisation kernel (fp8: row time and "
                "its own fixed cost) and the table's operand switching activity (0.67 of "
                "random data: the power-capped clock). Mechanisms: cuBLAS split-K as a second "
                "(reduction) kernel, no stream-K below one wave, vLLM's swap-AB scaled-mm "
                "tiles for m <= 64, no dynamic energy for the MMAs on a ragged tile's "
                "zero-filled padding (the power-capped clock), a CTA that follows another on "
                "its SM paying the store drain and its pipeline fill (two DRAM round trips). "
                "Left: compute-bound bf16 GEMMs of one wave predicted slow (+8 to +10 % "
                "median), mid-size GEMVs (20-60 MB of weights) reading HBM below the "
                "sustained rate. "
                "docs/gpu.md 'Framework kernel tables'")]


def _paper_baselines(archsim: EvaluationAPI) -> list[Gap]:
    """Which host stack the papers' GPU baselines ran, and whether their ratios emerge."""

    res_ref = load_reference("pim.yaml")["pim_gpt"]["results"]
    lo, hi = res_ref["speedup_vs_gpu"]["range"]
    elo, ehi = res_ref["energy_efficiency_vs_gpu"]["range"]
    parts = []
    for model in ("gpt2-small", "gpt2-xl"):
        pv = pim_vs_gpu(archsim, model)
        pim, pim_j = pv["pim_latency_s"], pv["pim_energy_j"]
        walls, joules = {}, {}
        for rt in ("ideal", "eager_hf"):
            acc = archsim.load("gpu/t4", [f"units[0].runtime={rt}"])
            res = archsim.evaluate(acc, archsim.workload(model, phase="decode", batch=1,
                                                         context=128))
            host = res.extra.get("host", {})
            walls[rt] = float(host.get("wall_s", res.latency_s))
            joules[rt] = float(host.get("energy_j", res.energy_j))
        parts.append(f"{model}: {walls['ideal'] / pim:.0f}x faster and "
                     f"{joules['ideal'] / pim_j:.0f}x less energy with device time only, "
                     f"{walls['eager_hf'] / pim:.0f}x and {joules['eager_hf'] / pim_j:.0f}x "
                     "with the eager_hf runtime")
    return [Gap("gpu_silicon", f"PIM-GPT's T4 baseline (published speedups {lo}-{hi}x, "
                f"energy efficiency {elo}-{ehi}x)",
                "a Hugging Face eager stack (runtime eager_hf: 114 us of host per op, "
                "arch/gpu/host.py; the board at its static power while it waits) makes the "
                "published ratios emerge where a lean runtime cannot: " + "; ".join(parts) +
                " (PIM 1 token, context 128). The large models fall below the range: the host "
                "time grows with the op count (gpt2-xl: 581 ops), PIM's time with the "
                "weights; the T4's static power (20 W) is tag C."),
            Gap("gpu_silicon", "LUT Tensor Core's Accel-Sim A100 baseline",
                "a cycle simulator's device time: runtime ideal is the matching setting; "
                "the remaining gap is the simulated GEMM efficiency (family lut)")]
