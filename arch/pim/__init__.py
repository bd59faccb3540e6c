"""DRAM processing-in-memory family (``kind: dram_pim``): see :mod:`arch.pim.unit`.

Modules: ``spec`` (configuration), ``unit`` (mapping, closed-form estimate, command-level
simulation), ``kernel`` (the Numba command loop), ``decode`` (whole-GPT token generation
with a growing KV cache, and the PIM-GPT comparison with a GPU).
"""

from archsim.arch.pim.spec import AsicSpec, DramPimSpec
from archsim.arch.pim.unit import DramPim, Plan, Stream

__all__ = ["AsicSpec", "DramPimSpec", "DramPim", "Plan", "Stream"]

import archsim.arch.pim.reference  # noqa: E402,F401  (registers golden workloads and checks)
