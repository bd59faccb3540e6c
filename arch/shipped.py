"""Where the files shipped with archsim are: the reference designs (``configs/``).

In a source checkout ``configs/`` sits beside the layer folders (``arch/``, ``sim/``, ...);
an installed archsim holds it as ``archsim/configs`` beside ``archsim/arch`` (pyproject's
package-dir maps both). Either way it is the folder next to this package's folder, so this is
the one place that computes it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["configs_dir"]


def configs_dir() -> Path:
    """The reference designs folder (``configs/`` in a checkout, ``archsim/configs`` installed)."""
    return Path(__file__).resolve().parent.parent / "configs"
