"""archsim: cycle-level models of AI accelerators — latency, energy and area.

The one import a user needs::

    from archsim import load, workload, evaluate

What each command of the command line does is a function here too: ``run_serving``
(``archsim serve``), ``search_plans`` (``archsim plan``), ``run_sweep`` (``archsim sweep``),
``evaluate_timeloop`` (``archsim map --timeloop``), ``calibrate`` (``archsim calibrate``),
``trace`` (``archsim trace``), ``evaluate_request`` (``archsim run/map/gemm``) and
``compare_designs`` (``archsim compare``).
"""

from pathlib import Path

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
from archsim.calibration import Calibration, calibrate, write_calibrated  # noqa: E402
from archsim.compare import Comparison, compare_designs  # noqa: E402
from archsim.explore import SweepReport, load_spec, run_sweep  # noqa: E402
from archsim.plans import PlanSearch, search_plans  # noqa: E402
from archsim.result import OpResult, Result  # noqa: E402
from archsim.run_request import RunRequest, evaluate_request  # noqa: E402
from archsim.serve.session import ServingRun, run_serving  # noqa: E402
from archsim.timeloop import TimeloopRun, evaluate_timeloop  # noqa: E402
from archsim.tracing import TraceSummary, trace  # noqa: E402

__version__ = VERSION

__all__ = ["load", "workload", "gemm_workload", "workload_from_dict", "evaluate", "find_config",
           "config_dir", "list_configs", "Result", "OpResult", "FIDELITIES", "VERSION", "__version__",
           "run_serving", "ServingRun", "search_plans", "PlanSearch", "run_sweep", "load_spec",
           "SweepReport", "evaluate_timeloop", "TimeloopRun", "calibrate", "write_calibrated",
           "Calibration", "trace", "TraceSummary", "evaluate_request", "RunRequest",
           "compare_designs", "Comparison"]
