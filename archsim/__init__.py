"""archsim: cycle-level models of AI accelerators — latency, energy and area.

The one import a user needs::

    from archsim import load, workload, evaluate

What each command of the command line does is a function here too: ``run_serving``
(``archsim serve``), ``search_plans`` (``archsim plan``), ``run_sweep`` (``archsim sweep``),
``evaluate_timeloop`` (``archsim map --timeloop``), ``calibrate`` (``archsim calibrate``),
``trace`` (``archsim trace``), ``evaluate_request`` (``archsim run/map/gemm``) and
``compare_designs`` (``archsim compare``).
"""

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

# One import root (docs/architecture.md): the layer folders (arch/, sim/, energy/, mapper/,
# dataflow/, workloads/) sit at the top of the repository and install as archsim.arch,
# archsim.sim, ... (pyproject's package-dir). In a source checkout they are beside this
# package rather than inside it: search the checkout's root too, so that archsim.<layer>
# always comes from the same tree as this file (a git worktree, or a checkout run without
# installing), never from another one an editable install points at.
_ROOT = Path(__file__).resolve().parent.parent
if not (Path(__file__).resolve().parent / "arch").is_dir() and (_ROOT / "arch" / "__init__.py").is_file():
    __path__.insert(1, str(_ROOT))  # noqa: F821 - a package's own __path__

from archsim.api import (  # noqa: E402
    FIDELITIES,
    VERSION,
    config_dir,
    evaluate,
    find_config,
    gemm_workload,
    list_configs,
    load,
    workload,
    workload_from_dict,
)
from archsim.result import OpResult, Result  # noqa: E402

#: What each command does, as a function: name -> module. Imported on first use (PEP 562), so
#: ``import archsim`` for one evaluation does not load serving, sweeps, plans and traces.
_LAZY = {
    "calibrate": "archsim.calibration", "write_calibrated": "archsim.calibration",
    "Calibration": "archsim.calibration", "compare_designs": "archsim.compare",
    "Comparison": "archsim.compare", "run_sweep": "archsim.explore", "load_spec": "archsim.explore",
    "SweepReport": "archsim.explore", "search_plans": "archsim.plans",
    "PlanSearch": "archsim.plans", "evaluate_request": "archsim.run_request",
    "RunRequest": "archsim.run_request", "run_serving": "archsim.serve.session",
    "ServingRun": "archsim.serve.session", "evaluate_timeloop": "archsim.timeloop",
    "TimeloopRun": "archsim.timeloop", "trace": "archsim.tracing",
    "TraceSummary": "archsim.tracing", "Varlen": "archsim.varlen",
    "provision": "archsim.serve.provision", "ProvisionSearch": "archsim.serve.provision",
}

if TYPE_CHECKING:
    from archsim.calibration import Calibration, calibrate, write_calibrated
    from archsim.compare import Comparison, compare_designs
    from archsim.explore import SweepReport, load_spec, run_sweep
    from archsim.plans import PlanSearch, search_plans
    from archsim.run_request import RunRequest, evaluate_request
    from archsim.serve.provision import ProvisionSearch, provision
    from archsim.serve.session import ServingRun, run_serving
    from archsim.timeloop import TimeloopRun, evaluate_timeloop
    from archsim.tracing import TraceSummary, trace
    from archsim.varlen import Varlen


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'archsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = VERSION

__all__ = ["load", "workload", "gemm_workload", "workload_from_dict", "evaluate", "find_config",
           "config_dir", "list_configs", "Result", "OpResult", "FIDELITIES", "VERSION", "__version__",
           "run_serving", "ServingRun", "search_plans", "PlanSearch", "run_sweep", "load_spec",
           "SweepReport", "evaluate_timeloop", "TimeloopRun", "calibrate", "write_calibrated",
           "Calibration", "trace", "TraceSummary", "evaluate_request", "RunRequest",
           "compare_designs", "Comparison", "Varlen", "provision", "ProvisionSearch"]
