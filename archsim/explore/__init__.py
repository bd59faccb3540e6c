"""Design-space exploration: sweep specs (with conditional axes), a resumable SQLite result
store, local and Dask backends, Pareto fronts and search (grid, random, NSGA-II), network /
hardware co-search, plots and a static HTML report. See docs/explore.md."""

from archsim.explore.cosearch import (
    CosearchResult,
    CosearchSpec,
    load_cosearch,
    parse_cosearch_text,
    run_cosearch,
)
from archsim.explore.pareto import designs, feasible, pareto_mask, pareto_rows, sweep_front
from archsim.explore.report import write_report
from archsim.explore.run import SweepReport, first_failure, run_sweep, run_tasks
from archsim.explore.spec import METRICS, SweepSpec, load_spec, parse_spec_text
from archsim.explore.store import ResultStore

__all__ = ["METRICS", "SweepSpec", "load_spec", "parse_spec_text", "ResultStore", "run_sweep",
           "run_tasks", "SweepReport", "first_failure", "pareto_mask",
           "pareto_rows", "designs", "feasible", "sweep_front", "CosearchSpec",
           "CosearchResult", "load_cosearch", "parse_cosearch_text", "run_cosearch",
           "write_report"]
