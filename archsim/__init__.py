"""archsim: cycle-level models of AI accelerators — latency, energy and area.

The one import a user needs::

    from archsim import load, workload, evaluate
"""

import sys

from arch.reference import install_api
from archsim.api import (
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
from archsim.result import OpResult, Result

__version__ = VERSION

# Hand the evaluation API down to the families' validation checks (arch/<family>/reference.py
# evaluate designs through it; arch never imports archsim).
install_api(sys.modules[__name__])

__all__ = ["load", "workload", "gemm_workload", "workload_from_dict", "evaluate", "find_config",
           "config_dir", "list_configs", "Result", "OpResult", "FIDELITIES", "VERSION", "__version__"]
