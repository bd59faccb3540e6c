"""Run SCALE-Sim on ResNet-18 and a GEMM set (32x32 array; OS, WS, IS) and keep its
per-layer cycles as parity data in ``tests/data/scalesim/``.

The topologies are generated from archsim's own workloads so that both tools see the same
layers: every ``Conv2d`` of ``workloads.zoo`` ResNet-18 (batch 1) becomes a SCALE-Sim conv
row with the *padded* input size (SCALE-Sim has no padding field: ofmap =
ceil((H - R + stride) / stride)), the FC layer becomes a 1x1 convolution on a 1x1 input.
The GEMM set is a SCALE-Sim ``-i gemm`` (M, N, K) topology.

SCALE-Sim (``pip install scalesim``, v3.0.0) runs in its own virtual environment::

    python3 -m venv /tmp/scalesim_venv && /tmp/scalesim_venv/bin/pip install scalesim
    python3 benchmarks/scalesim_parity.py --scalesim-python /tmp/scalesim_venv/bin/python \
        --workdir /tmp/scalesim_runs [--only resnet18] [--dataflows ws]

Each run is wrapped in ``/usr/bin/time -v`` (wall time and peak RSS kept in
``tests/data/scalesim/runs.csv``). Bandwidth mode ``CALC`` (SCALE-Sim sizes the DRAM
interface so that the array never stalls), 64 KiB per SRAM. SCALE-Sim v3.0.0's CLI writes
its per-layer SRAM/DRAM traces even with ``-s N`` (``scale.py`` hard-codes
``save_disk_space=False``); ``--no-trace`` runs it through its Python API with
``save_disk_space=True`` instead (timing only; the data files are not rewritten).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data" / "scalesim"

#: The GEMM topology (name, M, N, K): square, ragged (non-multiples of 32), skinny (FC / GEMV-
#: like) and tall shapes. 1024^3 is left out: SCALE-Sim needs ~4 min per dataflow for it.
GEMMS = [
    ("g_64", 64, 64, 64),
    ("g_ragged", 100, 200, 300),
    ("g_512", 512, 512, 512),
    ("g_fc", 1, 1000, 512),
    ("g_tall", 3136, 64, 576),
    ("g_wide", 49, 512, 4608),
    ("g_bert_qkv", 128, 2304, 768),
]

CFG = """[general]
run_name = archsim_parity_{df}

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:   64
FilterSramSzkB:  64
OfmapSramSzkB:   64
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : {df}
MemoryBanks:   1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""

# one layout row per layer (unused with CustomLayout False, but SCALE-Sim v3 reads the file)
LAYOUT_HEADER = ("Layer name, IFMAP Height Intraline Factor, IFMAP Width Intraline Factor, "
                 "Filter Height Intraline Factor, Filter Width Intraline Factor, Channel "
                 "Intraline Factor, Num Filter Intraline Factor, IFMAP Height Intraline Order, "
                 "IFMAP Width Intraline Order, Channel Intraline Order, IFMAP Height Interline "
                 "Order, IFMAP Width Interline Order, Channel Interline Order, Num Filter "
                 "Intraline Order, Channel Intraline Order, Filter Height Intraline Order, Filter "
                 "Width Intraline Order, Num Filter Interline Order, Channel Interline Order, "
                 "Filter Height Interline Order, Filter Width Interline Order,\n")
LAYOUT_ROW = ",1,1,1,1,1,1,1,2,0,4,5,3,3,0,1,2,7,4,5,6,\n"


def resnet18_layers() -> list[tuple[str, int, int, int, int, int, int, int]]:
    """(name, padded H, padded W, R, S, C, K, stride) of every matrix layer of archsim's
    ResNet-18 (batch 1); the FC layer as a 1x1 convolution on a 1x1 input."""
    from archsim.workloads.ops import Conv2d, Gemm
    from archsim.workloads.zoo import build

    out = []
    for op in build("resnet18").ops():
        if isinstance(op, Conv2d):
            out.append((op.name, op.h + 2 * op.padding, op.w + 2 * op.padding, op.r, op.s,
                        op.c, op.k, op.stride))
        elif isinstance(op, Gemm):
            out.append((op.name, 1, 1, 1, 1, op.k, op.n, 1))
    return out


def write_inputs(work: Path) -> dict[str, tuple[Path, Path, str]]:
    work.mkdir(parents=True, exist_ok=True)
    files = {}
    topo = work / "resnet18.csv"
    with open(topo, "w") as f:
        f.write("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                "Channels, Num Filter, Strides,\n")
        for row in resnet18_layers():
            f.write(", ".join(str(x) for x in row) + ",\n")
    lay = work / "resnet18_layout.csv"
    with open(lay, "w") as f:
        f.write(LAYOUT_HEADER)
        for row in resnet18_layers():
            f.write(row[0] + LAYOUT_ROW)
    files["resnet18"] = (topo, lay, "conv")
    topo = work / "gemms.csv"
    with open(topo, "w") as f:
        f.write("Layer, M, N, K,\n")
        for name, m, n, k in GEMMS:
            f.write(f"{name}, {m}, {n}, {k},\n")
    lay = work / "gemms_layout.csv"
    with open(lay, "w") as f:
        f.write(LAYOUT_HEADER)
        for name, *_ in GEMMS:
            f.write(name + LAYOUT_ROW)
    files["gemms"] = (topo, lay, "gemm")
    return files


def run_one(py: str, work: Path, topo: Path, lay: Path, kind: str, df: str, rows: int,
            cols: int, no_trace: bool = False) -> tuple[Path, float, float]:
    cfg = work / f"scale_{df}_{rows}x{cols}.cfg"
    cfg.write_text(CFG.format(df=df, rows=rows, cols=cols))
    out = work / f"out_{topo.stem}_{df}{'_notrace' if no_trace else ''}"
    out.mkdir(exist_ok=True)
    if no_trace:    # scalesim.scale ignores "-s N" in v3.0.0: call the API without traces
        code = ("from scalesim.scale_sim import scalesim; "
                f"s = scalesim(save_disk_space=True, verbose=True, config={str(cfg)!r}, "
                f"topology={str(topo)!r}, layout={str(lay)!r}, "
                f"input_type_gemm={kind == 'gemm'}); s.run_scale(top_path={str(out)!r})")
        cmd = ["/usr/bin/time", "-v", py, "-c", code]
    else:
        cmd = ["/usr/bin/time", "-v", py, "-m", "scalesim.scale", "-c", str(cfg), "-t",
               str(topo), "-l", str(lay), "-p", str(out), "-i", kind, "-s", "N"]
    print(" ".join(cmd), flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / "stdout.txt").write_text(p.stdout)
    (out / "stderr.txt").write_text(p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"SCALE-Sim failed ({p.returncode}); see {out}/stderr.txt")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rss_mib = int(m.group(1)) / 1024 if m else float("nan")
    reports = list(out.rglob("COMPUTE_REPORT.csv"))
    if len(reports) != 1:
        raise SystemExit(f"expected one COMPUTE_REPORT.csv under {out}, found {reports}")
    return reports[0], wall, rss_mib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scalesim-python", required=True)
    ap.add_argument("--workdir", default="/tmp/scalesim_runs")
    ap.add_argument("--only", choices=("resnet18", "gemms"))
    ap.add_argument("--dataflows", nargs="+", default=["os", "ws", "is"])
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--no-trace", action="store_true",
                    help="run through SCALE-Sim's API with save_disk_space=True (its CLI "
                    "writes per-layer SRAM/DRAM traces even with -s N); timing only")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    files = write_inputs(work)
    DATA.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([args.scalesim_python, "-c", "import importlib.metadata as m;"
                              "print(m.version('scalesim'))"], capture_output=True,
                             text=True).stdout.strip()
    runs = DATA / "runs.csv"
    for topo_name, (topo, lay, kind) in files.items():
        if args.only and topo_name != args.only:
            continue
        names = ([r[0] for r in resnet18_layers()] if topo_name == "resnet18"
                 else [g[0] for g in GEMMS])
        for df in args.dataflows:
            rep, wall, rss = run_one(args.scalesim_python, work, topo, lay, kind, df,
                                     args.rows, args.cols, args.no_trace)
            with open(rep) as f:
                rdr = csv.reader(f)
                next(rdr)
                rows = [[c.strip() for c in r if c.strip() != ""] for r in rdr if r]
            dst = DATA / f"{topo_name}_{args.rows}x{args.cols}_{df}.csv"
            if args.no_trace:
                dst = work / dst.name      # same cycles; keep the checked-in data as is
            with open(dst, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["layer", "total_cycles", "compute_cycles", "stall_cycles",
                            "overall_util_pct", "mapping_eff_pct", "compute_util_pct"])
                for name, r in zip(names, rows, strict=True):
                    w.writerow([name] + r[1:7])
            new = not runs.exists()
            with open(runs, "a", newline="") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(["topology", "dataflow", "rows", "cols", "scalesim_version",
                                "wall_s", "peak_rss_mib", "host_cpus", "traces_written"])
                w.writerow([topo_name, df, args.rows, args.cols, version, f"{wall:.1f}",
                            f"{rss:.0f}", os.cpu_count(), "no" if args.no_trace else "yes"])
            print(f"{topo_name} {df}: {wall:.1f} s, {rss:.0f} MiB -> {dst}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
