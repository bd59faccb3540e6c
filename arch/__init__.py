"""Accelerator families: YAML -> validated models; ``estimate``/``lower`` per op.

``arch.load(path)`` returns an :class:`Accelerator`; each family registers a
:class:`Unit` subclass under its YAML ``kind:`` (see ``arch/base.py`` for the contract).
"""

from archsim.arch.accelerator import Accelerator, TechnologySpec, load, load_data
from archsim.arch.base import UNIT_KINDS, Estimate, Unit, register
from archsim.arch.memory import MemorySpec

__all__ = ["Accelerator", "TechnologySpec", "load", "load_data", "UNIT_KINDS", "Estimate", "Unit",
           "register", "MemorySpec"]
