"""Imports every family module of ``arch/`` so that each registers its ``kind:``.

Adding a family = adding one module (or subpackage) to ``arch/``: this discovery finds it.
It lists the folder this file lives in (``pkgutil`` over a path) rather than importing the
``archsim.arch`` package, so the loader (:mod:`archsim.arch.accelerator`) can import it
without a cycle through the package's ``__init__``.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

#: The package the family modules are imported from (this module's own package).
_PACKAGE = __name__.rpartition(".")[0]
_CORE = {"base", "spec", "memory", "accelerator", "registry", "reference", "operands", "vector",
         "shipped"}

for _info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]),
                    key=lambda i: i.name):
    if _info.name not in _CORE and not _info.name.startswith("_"):
        importlib.import_module(f"{_PACKAGE}.{_info.name}")
