"""``archsim calibrate DATA.jsonl|TABLE.csv.gz --config gpu/h100 [--out FILE]``: fit a GPU
config to measured silicon rows or a framework kernel table and write the calibrated config
(:mod:`archsim.calibration`)."""

from __future__ import annotations

import argparse

from archsim.calibration import calibrate, write_calibrated

HELP = "fit a GPU config to measured silicon rows (JSON lines); see 'archsim calibrate --help'"
DESCRIPTION = ("Fit a GPU config's power, MMA-efficiency and library-rate constants to "
               "measured silicon rows (JSON lines) or, from a framework kernel table (CSV), the "
               "back-to-back launch cost, and write the calibrated config.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Measurements, config and output."""
    p.add_argument("data", help="measurement file: JSON lines (benchmarks/silicon/measure.py) "
                   "or a framework kernel table CSV (.csv/.csv.gz, e.g. "
                   "shared/reference/kernels_h100/gemm.csv.gz)")
    p.add_argument("--config", required=True, help="GPU config YAML or reference name "
                   "(e.g. gpu/h100); it must have a power: section")
    p.add_argument("--force", action="store_true", help="accept rows measured on another "
                   "device than the config's design")
    p.add_argument("--out", help="calibrated config to write (default: <name>_calibrated.yaml)")


def run(args: argparse.Namespace) -> int:
    """Fit, write the config (only if it loads), print the report."""
    cal = calibrate(args.data, args.config, force=args.force)
    print("\n".join(cal.report))
    if not cal.values:      # scored, not fitted: no "calibrated" config from these rows
        print("no constant of this table is fitted by archsim calibrate (scored only); "
              "no config written")
        return 0
    out = write_calibrated(cal, args.out)
    print(f"wrote {out}")
    return 0
