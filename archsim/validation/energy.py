"""The energy/area library at its base point against Horowitz's 45 nm table.

``shared/reference/energy_45nm.yaml`` (Horowitz, ISSCC 2014; tag C) is the base of every
logic energy and area in ``energy/``: ``energy/tables.py`` transcribes it and
``energy/arith.py`` derives the other widths and formats from it. These comparisons check
that the library, evaluated at 45 nm / 0.9 V, reproduces every tabulated point (a wrong
transcription or a width rule that misses its own anchor shows here), and put our DRAM
energy next to the table's 64-bit DRAM access.
``archsim.validation.core`` imports this module so that ``@checks`` registers it.
"""

from __future__ import annotations

from archsim.arch.reference import Comparison, EvaluationAPI, Gap, checks, load_reference
from archsim.energy import arith
from archsim.energy.classes import sram_read_64bit_pj
from archsim.energy.tables import DRAM_TECHS

__all__ = ["energy_checks"]

_SRC = "energy_45nm.yaml"
_WHY = "the library's base point (energy/tables.py transcribes this table)"


@checks("energy")
def energy_checks(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    """Library at 45 nm vs each energy/area row of energy_45nm.yaml; DRAM per 64 bits."""

    ref = load_reference(_SRC)
    comps: list[Comparison] = []
    rows = (("int_add", "int", arith.add_pj, arith.add_um2),
            ("int_mult", "int", arith.mult_pj, arith.mult_um2),
            ("fp_add", "fp", arith.add_pj, arith.add_um2),
            ("fp_mult", "fp", arith.mult_pj, arith.mult_um2))
    for key, prefix, e_fn, a_fn in rows:
        for quantity, table, fn, unit in (("energy", "energy_pj", e_fn, "pJ"),
                                          ("area", "area_um2", a_fn, "um2")):
            for bits, value in ref[table][key].items():
                fmt = arith.resolve_format(f"{prefix}{bits}")
                comps.append(Comparison(
                    "energy", f"{key.replace('_', ' ')} {bits}-bit {quantity} (45 nm)",
                    f"{_SRC} {table}.{key}.{bits}", "C", float(value), fn(fmt), unit, 0.01,
                    _WHY, design="energy library"))
    for cap, value in ref["energy_pj"]["sram_read_64bit"].items():
        nbytes = int(cap[:-2]) * (1024 if cap.endswith("KB") else 1024 * 1024)
        comps.append(Comparison(
            "energy", f"SRAM {cap} 64-bit read (45 nm)", f"{_SRC} energy_pj.sram_read_64bit."
            f"{cap}", "C", float(value), sram_read_64bit_pj(nbytes), "pJ", 0.01,
            "anchor of the sqrt(capacity) SRAM energy law (energy.classes)",
            design="energy library"))
    lo, hi = (float(v) for v in ref["energy_pj"]["dram_access_64bit"])
    ddr4 = float(DRAM_TECHS["ddr4"]["pj_per_bit"]) * 64
    gaps = []
    c = Comparison("energy", "DRAM 64-bit access (DDR4, incl. I/O)",
                   f"{_SRC} energy_pj.dram_access_64bit", "C", lo, ddr4, "pJ", 0.15,
                   "different device generations", design="energy library", reference_high=hi)
    if c.ok:
        comps.append(c)
    else:
        gaps.append(Gap("energy", f"DRAM 64-bit access {lo:g}-{hi:g} pJ (Horowitz 2014)",
                        f"ours {ddr4:g} pJ for DDR4 ({DRAM_TECHS['ddr4']['pj_per_bit']} pJ/bit "
                        f"incl. I/O, energy/tables.py DRAM_TECHS): the table's figure is an "
                        f"older (DDR3-era) device; a newer device is cheaper per bit, so ours "
                        f"stays on its own sourced value"))
    return comps, gaps
