"""Mapping: op -> (unit, mapping) assignment and scheduling.

``map_workload`` returns a :class:`Schedule`: every op gets one candidate per unit that can
run it (the unit's default mapping, or the best loop-nest mapping of ``mapper.gemm_search``),
restricted by the user's constraints (``mapper.constraints``); the HEFT-style list
scheduler of ``mapper.hetero`` assigns and times them on the workload DAG (overlap across
units, transfer costs). A one-unit design runs its ops back to back.
"""

from archsim.mapper.constraints import Constraints, load_constraints, parse_constraints
from archsim.mapper.gemm_search import GemmSearchResult, arch_params, best_mapping, search
from archsim.mapper.hetero import Link, Transfer, list_schedule
from archsim.mapper.schedule import OBJECTIVES, Assignment, Schedule, map_workload, objective_value

__all__ = ["OBJECTIVES", "Assignment", "Schedule", "map_workload", "objective_value",
           "GemmSearchResult", "arch_params", "best_mapping", "search", "Constraints",
           "load_constraints", "parse_constraints", "Link", "Transfer", "list_schedule"]
