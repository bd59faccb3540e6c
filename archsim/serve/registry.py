"""Registration by name, the Vidur way: one class + one decorator line adds a serving
policy (:mod:`archsim.serve.policy`) or a router (:mod:`archsim.serve.router`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["registrar"]

C = TypeVar("C", bound=type)


def registrar(table: dict[str, Any], what: str) -> Callable[[str], Callable[[C], C]]:
    """A decorator factory registering classes in ``table`` under a name (set as the class's
    ``name``); a name registered twice is a ``ValueError`` naming ``what`` it is."""

    def register(name: str) -> Callable[[C], C]:
        def deco(cls: C) -> C:
            if name in table:
                raise ValueError(f"{what} {name!r} already registered")
            setattr(cls, "name", name)  # noqa: B010 - C is any class; mypy cannot know it has .name
            table[name] = cls
            return cls

        return deco

    return register
