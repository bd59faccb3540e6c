"""Mapping: op -> (unit, mapping) assignment and scheduling.

``map_workload`` returns a :class:`Schedule`. The first version assigns every op to the
unit (among those that support it) whose default-mapping estimate is best for the
objective, and runs ops in topological order without overlap; the per-op mapping search
and the DAG list scheduler refine this (see ``mapper/search.py`` when present).
"""

from mapper.schedule import OBJECTIVES, Assignment, Schedule, map_workload, objective_value
from mapper.search import SearchResult, arch_params, best_mapping, search

__all__ = ["OBJECTIVES", "Assignment", "Schedule", "map_workload", "objective_value",
           "SearchResult", "arch_params", "best_mapping", "search"]
