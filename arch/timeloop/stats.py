"""Reader for Timeloop's ``timeloop-mapper.stats.txt`` (the figures parity is checked on).

Parses, per level and data space, the per-instance scalar reads, fills and updates and the
total energy; and the summary cycles, energy (uJ), utilisation and fJ/compute per level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from archsim.workloads.errors import ConfigError, Problem

__all__ = ["TimeloopStats", "read_stats"]


@dataclass
class TimeloopStats:
    """Figures of one stats file.

    Attributes:
        counts: (level, data space) -> {"reads", "fills", "updates"} per instance.
        energy_pj: (level, data space) -> total energy in pJ.
        cycles, energy_uj, utilization: summary.
        fj_per_compute: level (or "Total") -> fJ per MAC.
    """

    counts: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    energy_pj: dict[tuple[str, str], float] = field(default_factory=dict)
    cycles: int = 0
    energy_uj: float = 0.0
    utilization: float = 0.0
    fj_per_compute: dict[str, float] = field(default_factory=dict)


def read_stats(path: str | Path) -> TimeloopStats:
    """Parse a Timeloop stats file (raises :class:`ConfigError` if it has no summary)."""
    out = TimeloopStats()
    level: str | None = None
    space: str | None = None
    in_fj = False
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(Problem(f"cannot read file: {exc.strerror or exc}", "", str(path))) \
            from None
    for line in lines:
        if m := re.match(r"=== (\S+) ===", line):
            level, space = m.group(1), None
        elif m := re.match(r"    (\w+):$", line):
            space = m.group(1)
        elif (m := re.match(r"\s+Scalar (reads|fills|updates) \(per-instance\)\s+: (\d+)",
                            line)) and level and space:
            out.counts.setdefault((level, space), {})[m.group(1)] = int(m.group(2))
        elif (m := re.match(r"\s+Energy \(total\)\s+: ([\d.]+) pJ", line)) and level and space:
            out.energy_pj[(level, space)] = float(m.group(1))
        elif m := re.match(r"^Cycles: (\d+)", line):
            out.cycles = int(m.group(1))
        elif m := re.match(r"^Energy: ([\d.]+) uJ", line):
            out.energy_uj = float(m.group(1))
        elif m := re.match(r"^Utilization: ([\d.]+)%", line):
            out.utilization = float(m.group(1)) / 100
        elif line.startswith("fJ/Compute"):
            in_fj = True
        elif in_fj and (m := re.match(r"\s+(\S+)\s+= ([\d.]+)", line)):
            out.fj_per_compute[m.group(1)] = float(m.group(2))
    if not out.cycles:
        raise ConfigError(Problem("no 'Summary Stats' (Cycles:) found: not a Timeloop stats "
                                  "file", "", str(path)))
    return out
