"""Tensor-core GPUs: golden reference workloads and validation against ``gpus.yaml`` and
``a100_gemm_measured.csv`` (``arch.reference``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from archsim.arch.base import Unit
from archsim.arch.gpu.bench import MAMF_FINDER_V2, timed_call_s
from archsim.arch.reference import (
    Comparison,
    EvaluationAPI,
    Gap,
    checks,
    load_reference,
    reference_dir,
    reference_workloads,
)
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Elementwise, Gemm, Sparsity

reference_workloads("tensor_core_gpu", {
    "gemm_8192_fp16": {"gemm": [8192, 8192, 8192], "a_format": "fp16"},
    "gemm_w4a16_m16": {"gemm": [16, 8192, 8192], "a_format": "fp16", "w_format": "int4"},
    "llama2_7b_decode_b8": {"model": "llama2-7b", "phase": "decode", "batch": 8, "context": 1024},
    "resnet50_b32": {"model": "resnet50", "batch": 32},
})


@checks("gpu")
def _gpu(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """Tensor-core GPUs against gpus.yaml and a100_gemm_measured.csv."""


    config_dir = api.config_dir
    ref = load_reference("gpus.yaml")
    units = {n: api.load(config_dir() / "gpu" / f"{n}.yaml").units[0]
             for n in ("a100", "h100", "h200", "t4")}

    def tflops(name: str, m: int, n: int, k: int, fmt: str) -> float:
        f = FORMATS[fmt]
        e = units[name].estimate(Gemm(name="g", m=m, n=n, k=k, a_format=f, w_format=f))
        return 2.0 * m * n * k / e.latency_s / 1e12

    comps: list[Comparison] = []
    text = (reference_dir() / "a100_gemm_measured.csv").read_text().splitlines()
    for r in csv.DictReader(line for line in text if not line.startswith("#")):
        m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
        ms = units["a100"].estimate(Gemm(name="g", m=m, n=n, k=k)).latency_s * 1e3
        comps.append(Comparison(
            "gpu", f"fp16 GEMM {m}x{n}x{k} latency", "a100_gemm_measured.csv", "A/M",
            float(r["latency_ms"]), ms, "ms", 0.25,
            "issue bound: worst 25%, median 10% (tests/gpu); measurement includes host overhead",
            design="a100"))
    # The H200 carries every H100 constant (same die). Sustained bf16 8192^3 as our harness
    # measured it on a lent H200 (tests/data/silicon/h200_2026-11-26.jsonl, do_bench with an
    # L2 flush, back to back, host-timed and graph-replayed: 1.58-1.66 ms; never fitted).
    h200_8192 = tflops("h200", 8192, 8192, 8192, "bf16")
    sustained = _h200_sustained_8192_tflops()
    if sustained is not None:
        comps.append(Comparison("gpu", "bf16 GEMM 8192^3, sustained",
                                "tests/data/silicon/h200_2026-11-26.jsonl (our harness, lent "
                                "H200)", "M", sustained[0], h200_8192, "TFLOP/s", 0.10,
                                "carried H100 constants; the same shape on the H100 ran "
                                "1.60-1.69 ms", design="h200", reference_high=sustained[1]))
    lo, hi = ref["h200_measured"]["bf16_gemm_8192_cubed_tflops"]["random_data"]
    # the H200's sustained clock under dense bf16 GEMM, reported by two kernel projects
    e8 = units["h200"].estimate(Gemm(name="g", m=8192, n=8192, k=8192,
                                     a_format=FORMATS["bf16"], w_format=FORMATS["bf16"]))
    h200_gaps = [
        Gap("gpu", f"H200 bf16 GEMM 8192^3 burst (gpus.yaml h200_measured random_data "
            f"{lo}-{hi} TFLOP/s)", f"ten timed calls after three warm-ups, no flush: a burst "
            f"the power limiter has not settled on (not modelled: the model is the sustained "
            f"cap). Predicted {h200_8192:.0f} TFLOP/s ({h200_8192 / lo - 1:+.1%} from the "
            f"low end); our sustained H200 rows ran 1.58-1.66 ms = 662-695 TFLOP/s, the "
            f"H100's 1.60-1.69 ms. gpu/h200 once fitted its per-action energy to this figure "
            f"(3.97 vs the die's 5.58): our H200 GEMM rows were then 15 % fast and the "
            f"board energy 13 % low (docs/gpu.md \"H200\")"),
        Gap("gpu", "H200 sustained SM clock 1500-1575 MHz under dense bf16 MMA (TileOPs#1587, "
            "DeepGEMM#120, tag C)", f"predicted {e8.details['clock_mhz']:.0f} MHz at 8192^3; "
            "our own H200 rows read 1440-1485 MHz under bf16 4096^3 / 16384^3 at 690-696 W "
            "(the model 10-15 % low there: the H100 model's clock bias on its own "
            "re-measured rows is -2.3 % median, -10 % worst, and the H200 card held ~1-9 % "
            "higher clocks at the same limit). Throughput and energy are right "
            "(tests/gpu/test_h200_check.py), so the clock error is the V-f curve's, not the "
            "power's"),
    ]
    copy = Elementwise(name="copy", rows=1 << 15, cols=1 << 15, fn="copy", a_format=FORMATS["bf16"])
    e = units["h200"].estimate(copy)
    comps.append(Comparison("gpu", "device-to-device copy (2 GiB)", "gpus.yaml h200_measured."
                            "device_to_device_copy_tbps", "M",
                            ref["h200_measured"]["device_to_device_copy_tbps"],
                            e.dram_bytes / e.latency_s / 1e12, "TB/s", 0.10,
                            "not independent: HBM efficiency 0.9 = 4.3/4.8", design="h200"))
    best = ref["measured_best_gemm_tflops"]
    # Best-of-sweep figures, timed as mamf-finder v2 timed them (arch.gpu.bench: a 256 MiB
    # memset and an output copy before every call share the power limiter's window with the
    # GEMM): the short calls of a sweep run above the sustained clock.

    def mamf(name: str, m: int, n: int, k: int, fmt: str) -> float:
        f = FORMATS[fmt]
        op = Gemm(name="g", m=m, n=n, k=k, a_format=f, w_format=f)
        return 2.0 * m * n * k / timed_call_s(units[name], op, MAMF_FINDER_V2) / 1e12

    why = ("timed as mamf-finder v2 times it (L2 flush + output copy before each call, in "
           "the power window); a best-of-sweep also favours lucky shapes")
    for name, key, fmt, shape_key, val_key in (
            ("a100", "a100_sxm", "bf16", "shape_mnk", "bf16"),
            ("h100", "h100_sxm", "bf16", "shape_mnk", "bf16")):
        m, n, k = best[key][shape_key]
        comps.append(Comparison("gpu", f"best {fmt} GEMM {m}x{n}x{k} (mamf-finder)",
                                f"gpus.yaml measured_best_gemm_tflops.{key}.{val_key}", "M",
                                best[key][val_key], mamf(name, m, n, k, fmt), "TFLOP/s", 0.10,
                                why, design=name))
    # ml-engineering's table notes "H200 is the same" on the H100 bf16 row (same die)
    m, n, k = best["h100_sxm"]["shape_mnk"]
    h200_bf16 = mamf("h200", m, n, k, "bf16")
    h100_bf16 = mamf("h100", m, n, k, "bf16")
    m8, n8, k8 = best["h200_sxm"]["fp8_shape_mnk"]
    h200_fp8 = mamf("h200", m8, n8, k8, "fp8_e4m3")
    h200_gaps += [
        Gap("gpu", f"H200 best-of-sweep bf16 GEMM {m}x{n}x{k} (mamf-finder; ml-engineering: "
            f"\"H200 is the same\" as the H100's {best['h100_sxm']['bf16']} TFLOP/s)",
            f"timed as mamf-finder v2 times it: {h200_bf16:.0f} TFLOP/s "
            f"({h200_bf16 / best['h100_sxm']['bf16'] - 1:+.1%}), the H100 {h100_bf16:.0f}: "
            "the same die and constants, but the H200's faster HBM3e finishes the 256 MiB "
            "flush sooner, so less low-power time shares the limiter's window with the GEMM. "
            "A best-of-sweep also favours lucky shapes and cards"),
        Gap("gpu", f"H200 best-of-sweep fp8 GEMM {m8}x{n8}x{k8} (gpus.yaml "
            f"measured_best_gemm_tflops.h200_sxm.fp8_e4m3: {best['h200_sxm']['fp8_e4m3']} "
            "TFLOP/s)", f"timed as mamf-finder v2 times it: {h200_fp8:.0f} TFLOP/s "
            f"({h200_fp8 / best['h200_sxm']['fp8_e4m3'] - 1:+.1%}): the H100's fp8 gap "
            "below (same die and constants; the fp8 clock is low on the H100's own rows)"),
    ]
    m, n, k = best["h100_sxm"]["fp8_shape_mnk"]
    h100_fp8 = mamf("h100", m, n, k, "fp8_e4m3")
    h100_fp8_err = h100_fp8 / best["h100_sxm"]["fp8_e4m3"] - 1.0
    # Peak rates emerge from SMs x tensor-core rate x clock (spec sheet peaks, tag A/C).
    for name, key in (("a100", "a100_sxm_80gb"), ("h100", "h100_sxm_80gb"), ("t4", "t4")):
        u = units[name]
        for fmt, peak in ref[key]["peak_tflops"].items():
            if fmt not in FORMATS:
                continue
            f = FORMATS[fmt]
            op = Gemm(name="g", m=1, n=1, k=1, a_format=f, w_format=f)
            # NVIDIA quotes tensor-core peaks at the boost clock and the CUDA-core fp32 peak
            # at the maximum SM clock (H100: 132 x 128 x 2 x 1.98 GHz = 67 TFLOP/s).
            clock = u.clock_hz if fmt == "fp32" else u.spec.boost_clock_mhz * 1e6
            ours = 2 * u.peak_macs_per_cycle(op) * clock / 1e12
            comps.append(Comparison("gpu", f"peak {fmt}", f"gpus.yaml {key}.peak_tflops.{fmt}",
                                    "A/C", float(peak), ours, "TFLOP/s", 0.02,
                                    "spec-sheet arithmetic: SMs x MMA rate x boost clock",
                                    design=name))
    gaps = h200_gaps + [
        Gap("gpu", "A100 memory-bound points (M <= 128)", "predicted 10–14% fast: the "
            "measurement includes PyTorch host overhead (LLMCompass adds 21 us); we charge a "
            "4 us launch only"),
        Gap("gpu", "H200 copy", "not an independent check: the HBM efficiency (0.9) is this "
            "figure divided by the 4.8 TB/s peak"),
        Gap("gpu", "h200_measured zeros (894 TFLOP/s)", "data-dependent power is not "
            "modelled (the per-action energies do not depend on the operand values)"),
        Gap("gpu", "h200_measured sm_clock/l2/sm_count", "configuration facts, used as inputs of "
            "configs/gpu/h200.yaml rather than compared"),
        Gap("gpu", f"H100 best-of-sweep fp8 GEMM {m}x{n}x{k} (gpus.yaml "
            "measured_best_gemm_tflops.h100_sxm.fp8_e4m3: 1402.6 TFLOP/s)",
            f"timed as mamf-finder v2 times it, the power-capped H100 predicts {h100_fp8:.0f} "
            f"TFLOP/s ({h100_fp8_err:+.1%}). The same bias shows on held-out silicon: under "
            "sustained fp8 GEMM the modelled clock is 5% low (1125 vs 1185 MHz, family "
            "gpu_silicon), i.e. the fp8 MMA energy (library prior x the one fitted scale; no "
            "fp8 row is in the calibration half) is a little high; the best-of-sweep was "
            "also taken on another card"),
        _flash_llm_gap(units["a100"]),
    ]
    return comps, gaps


#: Flash-LLM's kernel benchmark (AlibabaResearch/flash-llm, kernel_benchmark/benchmark.sh):
#: weight shapes (M output features x K input features) of OPT-30B/66B/175B layers, times
#: N = 8, 16, 32 tokens (the README figure's three panels)
FLASH_LLM_MK = ((21504, 7168), (7168, 7168), (28672, 7168), (7168, 28672), (27648, 9216),
                (9216, 9216), (36864, 9216), (9216, 36864), (36864, 12288), (12288, 12288),
                (49152, 12288), (12288, 49152))
#: The README's "outperform ... cuBLAS with Tensor Core enabled by 1.4x, 1.7x, and 2.1x"
#: at 70 %, 80 % and 90 % unstructured sparsity (A100)
FLASH_LLM_VS_CUBLAS = {0.7: 1.4, 0.8: 1.7, 0.9: 2.1}


def _flash_llm_gap(a100: Unit) -> Gap:
    """Flash-LLM's kernel speedup over cuBLAS (unstructured sparsity, A100): not reached at
    80-90 %; ours is the mean over the authors' benchmark shapes."""
    fp16 = FORMATS["fp16"]

    def t(n: int, m: int, k: int, density: float) -> float:
        return a100.estimate(Gemm(name="g", m=n, n=m, k=k, a_format=fp16, w_format=fp16,
                                  w_sparsity=Sparsity(density=density))).latency_s

    def speedup(frac: float) -> float:
        r = [t(n, m, k, 1.0) / t(n, m, k, 1 - frac) for n in (8, 16, 32)
             for m, k in FLASH_LLM_MK]
        return sum(r) / len(r)

    ours = ", ".join(f"{f:.0%} {speedup(f):.2f}x (published {p}x)"
                     for f, p in FLASH_LLM_VS_CUBLAS.items())
    return Gap("gpu", "Flash-LLM SpMM vs cuBLAS (tensor cores) on A100 at 70/80/90% "
               "unstructured sparsity: 1.4x / 1.7x / 2.1x (Xia et al., VLDB 2024; the "
               "authors' README, AlibabaResearch/flash-llm)",
               f"not reached at 80-90%: ours (--weight-sparsity, their tiled-CSL encoding of "
               f"4 B per fp16 non-zero), mean over the authors' 36 benchmark GEMMs (12 OPT "
               f"weight shapes x N 8/16/32, kernel_benchmark/benchmark.sh): {ours}. Ours "
               "streams the compressed weights at the dense kernel's HBM efficiency and "
               "overlaps the on-chip expansion with that stream (max of the two), so the "
               "speedup follows the byte ratio (1.67x / 2.5x / 5x) until the expansion binds. "
               "The README figure's bars fall short of the byte ratio more as sparsity grows "
               "(at N = 8: ~19 / ~23 / ~29 TFLOP/s against cuBLAS's ~12.5, read from the "
               "figure): a cost per dense weight element that does not shrink with the non-"
               "zeros (the expanded tile's pass through shared memory, not fully hidden "
               "behind the stream). Not fitted here: the GPU GEMM constants are calibrated on "
               "measured H100/A100 dense GEMMs, and Flash-LLM's bars are not in "
               "shared/reference")


def _h200_sustained_8192_tflops() -> tuple[float, float] | None:
    """Lowest and highest bf16 8192^3 throughput (TFLOP/s) in our own H200 rows
    (``tests/data/silicon/h200_2026-11-26.jsonl``: the ``gemm`` rows' ``ms`` and the
    ``protocol`` row's flushed, back-to-back, host-timed and graph-replayed times); None
    without the file (an installed package)."""
    path = Path(__file__).resolve().parents[2] / "tests" / "data" / "silicon" / "h200_2026-11-26.jsonl"
    if not path.exists():
        return None
    times: list[float] = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if (r.get("op", "gemm") == "gemm" and r.get("dtype") == "bf16"
                and (r.get("m"), r.get("n"), r.get("k")) == (8192, 8192, 8192)):
            if r.get("kind") == "gemm":
                times.append(float(r["ms"]))
            elif r.get("kind") == "protocol":
                times += [float(r[k]) for k in ("flush_ms", "b2b_ms", "host_ms", "graph_ms")]
    if not times:
        return None
    flops = 2.0 * 8192 ** 3
    return flops / max(times) / 1e9, flops / min(times) / 1e9
