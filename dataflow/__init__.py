"""Dataflows: loop-nest mappings, tilings, stationarity and access counts.

See :mod:`dataflow.mapping` for the model.
"""

from archsim.dataflow.mapping import (
    ACTIONS,
    DATAFLOW_CONSTRAINTS,
    DIMS,
    LEVELS,
    TENSORS,
    AccessCounts,
    ArchParams,
    Cost,
    Mapping,
    Shape,
    analyse,
    cost,
    feasible,
    iterate,
    make,
    refetch,
    tile_shape,
)

__all__ = ["ACTIONS", "DATAFLOW_CONSTRAINTS", "DIMS", "LEVELS", "TENSORS", "AccessCounts",
           "ArchParams", "Cost", "Mapping", "Shape", "analyse", "cost", "feasible", "iterate",
           "make", "refetch", "tile_shape"]
