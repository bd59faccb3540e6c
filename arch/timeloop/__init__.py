"""Timeloop/Accelergy v0.4 inputs (architecture, problem, mapping, ERT), read in pure Python.

See :mod:`arch.timeloop.reader` and ``docs/timeloop.md``.
"""

from archsim.arch.timeloop.ert import DerivedErt, ErtEntry, derive_ert
from archsim.arch.timeloop.reader import (
    Constraints,
    LevelConstraint,
    TimeloopDesign,
    arch_ert,
    load_dir,
    load_yaml_any,
    read_arch,
    read_ert,
    read_mapping,
    read_problem,
    write_mapping,
)
from archsim.arch.timeloop.stats import TimeloopStats, read_stats

__all__ = ["Constraints", "LevelConstraint", "TimeloopDesign", "load_dir", "load_yaml_any",
           "read_arch", "read_ert", "read_mapping", "read_problem", "write_mapping",
           "TimeloopStats", "read_stats", "DerivedErt", "ErtEntry", "derive_ert", "arch_ert"]
