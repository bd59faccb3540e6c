"""archsim: cycle-level models of AI accelerators — latency, energy and area.

The one import a user needs::

    from archsim import load, workload, evaluate
"""

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

__all__ = ["load", "workload", "gemm_workload", "workload_from_dict", "evaluate", "find_config",
           "config_dir", "list_configs", "Result", "OpResult", "FIDELITIES", "VERSION", "__version__"]
