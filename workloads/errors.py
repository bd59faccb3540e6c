"""The error family for user mistakes (bad configs, workloads, mappings, specs, flags).

Every user-facing error carries one or more :class:`Problem` records, each naming the
file, line and key path and what was expected, e.g.::

    configs/gpu/h100.yaml:12 units[0].sm_count: expected int >= 1, got '1k'

All problems found in one input are collected and raised together. Program bugs are not
wrapped: they raise ordinary Python exceptions.

This module lives in ``workloads/`` because that is the lowest layer: every other layer
(``energy``, ``sim``, ``arch``, ``mapper``, ``archsim``) may import it.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = ["Problem", "ArchsimError", "ConfigError", "WorkloadError", "MappingError", "SpecError",
           "inert"]


def inert(text: str) -> str:
    """``text`` safe to print as (part of) one line: control and format characters (newline,
    carriage return, ESC of terminal sequences, bidi overrides ...) become visible escapes
    (``\\n``, ``\\x1b``, ``\\u202e``). Names and strings that come from inputs go through
    this before they are printed, so an input cannot forge an output line or drive the
    terminal."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (ch == " "):
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one input.

    Attributes:
        message: what is wrong and what was expected.
        path: key path inside the input (``units[0].tensor_core.mma_rate``), or "".
        file: the file (or pseudo-file such as ``--set``), or None.
        line: 1-based line in ``file``, or None.
    """

    message: str
    path: str = ""
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        if self.path:
            where = f"{where} {self.path}" if where else self.path
        return inert(f"{where}: {self.message}" if where else self.message)


class ArchsimError(Exception):
    """Base of all user-input errors. Holds every problem found, in input order."""

    kind = "error"

    def __init__(self, problems: list[Problem] | Problem | str,
                 summary: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.summary = summary
        super().__init__(self.render())

    def render(self) -> str:
        """All problems, one per line, prefixed by the error kind (and by ``summary``, the
        headline, when the problems shown stand for more than themselves)."""
        if len(self.problems) == 1 and self.summary is None:
            return f"{self.kind}: {self.problems[0]}"
        lines = [f"{self.kind}: {self.summary or f'{len(self.problems)} problems'}"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


class ConfigError(ArchsimError):
    """A hardware configuration (YAML or ``--set`` override) is invalid."""

    kind = "config error"


class WorkloadError(ArchsimError):
    """A workload, model name, number format or imported model file is invalid."""

    kind = "workload error"


class MappingError(ArchsimError):
    """A user-supplied mapping or mapping constraint is invalid.

    An *infeasible* mapping found during search is not an error: it is data with reasons.
    """

    kind = "mapping error"


class SpecError(ArchsimError):
    """A sweep / co-search specification is invalid."""

    kind = "spec error"
