"""Imports every family module of ``arch/`` so that each registers its ``kind:``.

Adding a family = adding one subpackage to ``arch/``: this discovery finds it.
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


def family_packages() -> list[str]:
    """Import names of the family packages: every subpackage of ``arch/`` (a family is one
    package, ``arch/<family>/``; the loader, clusters and collectives are plain modules and
    are not imported here, so nothing this discovery loads can import the loader back)."""
    return [f"{_PACKAGE}.{i.name}" for i in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]),
                                                  key=lambda i: i.name)
            if i.ispkg and not i.name.startswith("_")]


for _name in family_packages():
    importlib.import_module(_name)
