"""Validation: every comparison of a prediction with a published or measured figure.

``core`` runs the registered checks and renders ``docs/validation.md``. Checks live with
what they check: each hardware family's in ``arch/<family>/reference.py``; the cross-cutting
ones (model zoo, energy tables, mapper, exploration) in this package's other modules.
"""

from archsim.validation.core import (
    CHECKS,
    FAMILIES,
    Comparison,
    Gap,
    checks,
    first_unit,
    load_reference,
    plot,
    reference_dir,
    render_markdown,
    run,
)

__all__ = ["Comparison", "Gap", "checks", "run", "render_markdown", "plot", "reference_dir",
           "load_reference", "FAMILIES", "first_unit", "CHECKS"]
