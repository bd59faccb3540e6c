"""The comparisons of each family (registered with ``archsim.validation.checks``)."""

from __future__ import annotations

import archsim.validation_fpga  # noqa: F401  (registers "fpga")
import archsim.validation_mapper  # noqa: F401  (registers "mapper")
import archsim.validation_pim  # noqa: F401  (registers "pim")
from archsim.validation import Comparison, Gap, checks


@checks("workloads")
def _workloads() -> tuple[list[Comparison], list[Gap]]:
    """Model zoo identity: parameter counts and MACs against the published figures."""
    from workloads.zoo import model_info, model_names

    comps = []
    for name in model_names():
        info = model_info(name)
        comps.append(Comparison(
            "workloads", "parameters", info.published_source, "A", info.published_parameters,
            info.parameters, "params", 0.02, "identity: shapes from the published configs",
            design=name))
        if info.published_macs:
            comps.append(Comparison(
                "workloads", "MACs per sample", info.published_macs_source, "A",
                info.published_macs, _macs(name), "MAC", 0.02,
                "identity: counted from op shapes", design=name))
    return comps, []


def _macs(name: str) -> float:
    from workloads.zoo import build

    w = build(name)
    return float(sum(op.macs() for op in w.ops() if op.pass_ == "fwd")) / w.batch


@checks("spatial")
def _spatial() -> tuple[list[Comparison], list[Gap]]:
    gaps = [Gap("spatial", "tpu_like, eyeriss_like, nvdla_like, shidiannao_like, "
                "hetero/nvdla_shidiannao",
                "shared/reference has no figure for these designs; their cycle model is "
                "checked against closed-form SCALE-Sim fold counts in tests/arch and against "
                "SCALE-Sim's own per-layer cycles in tests/cycle; the Timeloop Eyeriss "
                "cross-check is in the 'mapper' family")]
    return [], gaps


@checks("gpu")
def _gpu() -> tuple[list[Comparison], list[Gap]]:
    """Tensor-core GPUs against gpus.yaml and a100_gemm_measured.csv."""
    import csv

    from arch import load
    from archsim.api import config_dir
    from archsim.validation import load_reference, reference_dir
    from workloads.formats import FORMATS
    from workloads.ops import Elementwise, Gemm

    ref = load_reference("gpus.yaml")
    units = {n: load(config_dir() / "gpu" / f"{n}.yaml").units[0]
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
    lo, hi = ref["h200_measured"]["bf16_gemm_8192_cubed_tflops"]["random_data"]
    comps.append(Comparison("gpu", "bf16 GEMM 8192^3", "gpus.yaml h200_measured."
                            "bf16_gemm_8192_cubed_tflops.random_data", "M", lo,
                            tflops("h200", 8192, 8192, 8192, "bf16"), "TFLOP/s", 0.10,
                            "run-to-run and card spread", design="h200", reference_high=hi))
    copy = Elementwise(name="copy", rows=1 << 15, cols=1 << 15, fn="copy", a_format=FORMATS["bf16"])
    e = units["h200"].estimate(copy)
    comps.append(Comparison("gpu", "device-to-device copy (2 GiB)", "gpus.yaml h200_measured."
                            "device_to_device_copy_tbps", "M",
                            ref["h200_measured"]["device_to_device_copy_tbps"],
                            e.dram_bytes / e.latency_s / 1e12, "TB/s", 0.10,
                            "not independent: HBM efficiency 0.9 = 4.3/4.8", design="h200"))
    best = ref["measured_best_gemm_tflops"]
    for name, key, fmt, shape_key, val_key in (
            ("a100", "a100_sxm", "bf16", "shape_mnk", "bf16"),
            ("h100", "h100_sxm", "bf16", "shape_mnk", "bf16"),
            ("h100", "h100_sxm", "fp8_e4m3", "fp8_shape_mnk", "fp8_e4m3"),
            ("h200", "h200_sxm", "fp8_e4m3", "fp8_shape_mnk", "fp8_e4m3")):
        m, n, k = best[key][shape_key]
        comps.append(Comparison("gpu", f"best {fmt} GEMM {m}x{n}x{k}",
                                f"gpus.yaml measured_best_gemm_tflops.{key}.{val_key}", "M",
                                best[key][val_key], tflops(name, m, n, k, fmt), "TFLOP/s", 0.10,
                                "best-of-sweep figure favours lucky shapes/clocks", design=name))
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
    gaps = [
        Gap("gpu", "A100 memory-bound points (M <= 128)", "predicted 10–14% fast: the "
            "measurement includes PyTorch host overhead (LLMCompass adds 21 us); we charge a "
            "4 us launch only"),
        Gap("gpu", "H200 copy", "not an independent check: the HBM efficiency (0.9) is this "
            "figure divided by the 4.8 TB/s peak"),
        Gap("gpu", "h200_measured zeros (894 TFLOP/s)", "data-dependent power/clock is not "
            "modelled (one tensor clock per design)"),
        Gap("gpu", "h200_measured sm_clock/l2/sm_count", "configuration facts, used as inputs of "
            "configs/gpu/h200.yaml rather than compared"),
    ]
    return comps, gaps


@checks("lut")
def _lut() -> tuple[list[Comparison], list[Gap]]:
    """LUT tensor cores against lut_tensor_core.yaml (Table 1 A100 rows, Table 2)."""
    import arch.lut as L
    from archsim.api import config_dir, evaluate, load, workload

    cfg = config_dir()
    units = {"lut4x": load(cfg / "lut" / "a100_lut4x.yaml").units[0],
             "lut8x": load(cfg / "lut" / "a100_lut8x.yaml").units[0]}
    a100 = load(cfg / "gpu" / "a100.yaml")
    src = "lut_tensor_core.yaml results.table1_a100_rows"
    comps: list[Comparison] = []
    for key, row_cfg, area, dens, peak in (("lut4x", "A100-LUT-4X", 0.187, 61.84, 1248),
                                           ("lut8x", "A100-LUT-8X", 0.373, 61.95, 2496)):
        u = units[key]
        comps += [
            Comparison("lut", "tensor-core area per SM (28 nm)", src, "B", area,
                       u.tc_area_per_sm_mm2(), "mm2", 0.15, "issue bound; structural area "
                       "from energy/ components", design=row_cfg),
            Comparison("lut", "compute density W_INT2 (28 nm)", src, "B", dens,
                       u.compute_density(2), "TOPS/mm2", 0.15, "issue bound", design=row_cfg),
            Comparison("lut", "peak W_INT2 TOPs", src, "B", peak, u.peak_tops(2), "TOPs", 0.02,
                       "arithmetic of tile x array scale x clock", design=row_cfg)]
    lut4 = units["lut4x"]
    comps.append(Comparison("lut", "LUT tile area (W_INT2 A_INT8, M*N*K=512)",
                            "lut_tensor_core.yaml results.table2_vs_unpu[3]", "B", 11991.29,
                            sum(lut4.lut_area_breakdown_mm2().values()) / lut4.n_tiles() * 1e6,
                            "um2", 0.15, "issue bound", design="A100-LUT-4X"))
    comps.append(Comparison("lut", "INT8 tensor-core area per SM (DP16 m8n4k16)", src, "B",
                            0.312, L.mac_dp_area_per_sm_mm2(a100.units[0].spec, "int8", 16),
                            "mm2", 0.15, "issue bound", design="A100 INT8 TC"))

    def prefill_ms(acc, a=None, w=None) -> float:
        wl = workload("bitnet-b1.58-3b", phase="prefill", batch=1, seq=2048, a_format=a,
                      w_format=w)
        return evaluate(acc, wl).latency_s * 1e3

    fp16 = prefill_ms(a100, "fp16", "fp16")
    int8 = prefill_ms(a100)
    l4, l8 = prefill_ms(load(cfg / "lut" / "a100_lut4x.yaml")), prefill_ms(load(cfg / "lut" / "a100_lut8x.yaml"))
    comps += [
        Comparison("lut", "BitNet 3B prefill fp16/int8 latency ratio", src, "B", 106.71 / 67.06,
                   fp16 / int8, "x", 0.15, "issue bound", design="A100"),
        Comparison("lut", "BitNet 3B prefill (bs1, seq 2048)", src, "B", 42.49, l4, "ms", 0.25,
                   "issue bound (absolute)", design="A100-LUT-4X"),
        Comparison("lut", "BitNet 3B prefill (bs1, seq 2048)", src, "B", 38.02, l8, "ms", 0.25,
                   "issue bound (absolute)", design="A100-LUT-8X"),
    ]
    sweep = L.weight_bit_sweep(units["lut4x"], a100.units[0])
    ahead = max(int(r["w_bits"]) for r in sweep if r["lut_density"] > r["mac_int8_density"])
    comps.append(Comparison(
        "lut", "widest weight where LUT density beats INT8 MAC", "lut_tensor_core paper text "
        "(issue #6: 'LUT ahead up to about 6-bit weights')", "B", 6, ahead, "bits", 0.2,
        "one bit of the 1..8 sweep (docs/lut.md)", design="A100-LUT-4X"))
    gaps = [
        Gap("lut", "A100 FP16 TC area/SM 0.975 mm2 and density 2.96; INT8 density 17.73",
            "not reached (ours +30% / −23% / +22%): the energy library's fp16 adder area is "
            "close to its fp16 multiplier; no constant was tuned. The paper's own INT8 row is "
            "inconsistent: 624/(108 x 0.312) = 18.5, not 17.73"),
        Gap("lut", "DP4 density 61.55 vs 3.39 TFLOPS/mm2 (Fig. 12)",
            "not reached (ours ~10.1 vs 1.81, 5.6x instead of 18x): the paper's whole LUT DP4 "
            "unit (~130 um2) is smaller than one fp16 adder of our area table"),
        Gap("lut", "BitNet 3B prefill fp16/LUT ratios 2.51x / 2.81x",
            f"ours {fp16 / l4:.2f}x / {fp16 / l8:.2f}x: our A100 fp16 prefill ({fp16:.1f} ms) "
            "is faster than the paper's 106.7 ms, and the A100's 64 B/clock L2->SM path limits "
            "LUT-8X so it barely beats LUT-4X"),
        Gap("lut", "BitNet 3B decode (bs 1024) latencies and ratios",
            "not reached: with a 1024-token KV cache, fp16 attention takes ~190 ms on all four "
            "designs; the paper's figures evidently exclude it. Weight GEMMs alone give ratios "
            "vs fp16 of 2.03 / 3.10 / 3.16 (paper 1.90 / 3.61 / 5.51)"),
    ]
    return comps, gaps


@checks("explore")
def _explore() -> tuple[list[Comparison], list[Gap]]:
    """NASAIC (nasaic.yaml): figures that do not apply numerically, and why."""
    return [], [Gap(
        "explore", "NASAIC vs successive NAS->ASIC: latency -17.77%, energy 2.49x, area 2.32x, "
        "accuracy -0.76% (nasaic.yaml)",
        "not comparable as numbers: NASAIC's template set, tasks and accuracy data are not "
        "public; examples/nasaic reproduces the narrative with an illustrative accuracy "
        "predictor (tag C): the network-first baseline violates spec S1 (latency 2.75 ms, "
        "energy 2.24 mJ) that co-search meets at 0.73 points lower accuracy (docs/explore.md)")]
