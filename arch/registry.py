"""Imports every family module of ``arch/`` so that each registers its ``kind:``.

Adding a family = adding one module (or subpackage) to ``arch/``: this discovery finds it.
"""

from __future__ import annotations

import importlib
import pkgutil

from archsim import arch

_CORE = {"base", "spec", "memory", "accelerator", "registry", "reference", "operands", "vector",
         "shipped"}

for _info in sorted(pkgutil.iter_modules(arch.__path__), key=lambda i: i.name):
    if _info.name not in _CORE and not _info.name.startswith("_"):
        importlib.import_module(f"archsim.arch.{_info.name}")
