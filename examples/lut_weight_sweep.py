"""Weight-bit sweep of the LUT tensor core versus MAC tensor cores (issue #6).

Run: ``python3 examples/lut_weight_sweep.py [--plot docs/lut_weight_sweep.png]``; prints
the markdown table of ``docs/lut.md``. Model: ``arch.lut.weight_bit_sweep``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import archsim  # noqa: E402
from archsim.arch.lut import weight_bit_sweep  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--plot", help="write the plot here (PNG or SVG)")
    args = ap.parse_args()
    lut = archsim.load("lut/a100_lut4x").units[0]
    mac = archsim.load("gpu/a100").units[0]
    rows = weight_bit_sweep(lut, mac)
    print("| W bits | LUT TOPS/mm² | LUT, no symmetrisation | INT8 MAC | FP16 MAC | "
          "2048×3200×3200 LUT-4X ms | A100 INT8 TC ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ms = (f"{r['lut_ms']:.3f} | {r['mac_ms']:.3f}" if not math.isnan(r["lut_ms"])
              else "– | –")
        print(f"| {int(r['w_bits'])} | {r['lut_density']:.1f} | {r['lut_nosym_density']:.1f} | "
              f"{r['mac_int8_density']:.1f} | {r['mac_fp16_density']:.2f} | {ms} |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        w = [r["w_bits"] for r in rows]
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(w, [r["lut_density"] for r in rows], "o-", label="LUT (symmetrised, INT8 table)")
        ax.plot(w, [r["lut_nosym_density"] for r in rows], "s--", label="LUT, no symmetrisation")
        ax.plot(w, [r["mac_int8_density"] for r in rows], "-", label="INT8 MAC (DP16)")
        ax.plot(w, [r["mac_fp16_density"] for r in rows], ":", label="FP16 MAC (DP4)")
        ax.set_yscale("log")
        ax.set_xlabel("weight bits")
        ax.set_ylabel("peak TOPS / mm² of tensor core (28 nm, 1.41 GHz)")
        ax.set_title("LUT vs MAC tensor cores as the weight width grows")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
