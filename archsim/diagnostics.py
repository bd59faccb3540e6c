"""How archsim shows warnings: one ``warning: MESSAGE`` line each on stderr.

The library reports what deserves a second look (an implausible config value, a flag that
changed nothing, a substituted number format) through :mod:`warnings`; the command line and
the sweep's worker processes install :func:`print_warnings` so that each shows as one line,
without Python's file/line prefix.
"""

from __future__ import annotations

import sys
import warnings
from typing import TextIO

from archsim.arch.spec import PlausibilityWarning

__all__ = ["print_warnings"]


def print_warnings(stream: TextIO | None = None) -> None:
    """Show :class:`~archsim.arch.spec.PlausibilityWarning` (and other ``UserWarning``) as
    one ``warning: ...`` line each on ``stream`` (stderr), each distinct message once."""
    out = stream or sys.stderr

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        out.write(f"warning: {message}\n")

    warnings.simplefilter("default", PlausibilityWarning)
    warnings.showwarning = show
