"""Errors raised by :mod:`sim` for bad inputs (program bugs are left to raise)."""

from __future__ import annotations


class SimInputError(ValueError):
    """A task graph, DRAM spec or run argument is invalid; the message names the field."""


class TaskGraphError(SimInputError):
    """A :class:`sim.taskgraph.TaskGraph` violates its invariants (ids, DAG, sizes)."""


class DramConfigError(SimInputError):
    """A :class:`sim.dram.DramSpec` is inconsistent (organisation, timing, mapping)."""
