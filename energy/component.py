"""The two value types callers build: ``Technology`` and ``Component``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from archsim.energy import scaling

__all__ = ["FrozenMap", "Technology", "Component"]


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FrozenMap(value)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, set):
        return frozenset(_freeze(v) for v in value)
    return value


class FrozenMap(Mapping[str, Any]):
    """Read-only, hashable mapping (nested mappings/lists are frozen too)."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        data = {} if items is None else {k: _freeze(v) for k, v in dict(items).items()}
        self._items: dict[str, Any] = data
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(sorted(self._items.items(), key=lambda kv: str(kv[0]))))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def to_dict(self) -> dict[str, Any]:
        """Plain, mutable copy (nested FrozenMaps become dicts, tuples stay tuples)."""
        return {k: (v.to_dict() if isinstance(v, FrozenMap) else v) for k, v in self._items.items()}


@dataclass(frozen=True)
class Technology:
    """A logic process: node and supply.

    Attributes:
        node_nm: process node in nm (3-180; Stillmaker & Baas 180-7 nm, extrapolated below).
        vdd_v: supply in volts; None = the node's nominal supply
            (:func:`energy.scaling.nominal_vdd_v`; 0.9 V at 45 nm).

    Raises:
        ValueError: node out of range or supply outside the fits' range.
    """

    node_nm: float = 45.0
    vdd_v: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.node_nm, bool) or not isinstance(self.node_nm, (int, float)):
            raise ValueError(f"Technology.node_nm: expected a number of nm, got {self.node_nm!r}")
        if self.vdd_v is not None and (
            isinstance(self.vdd_v, bool) or not isinstance(self.vdd_v, (int, float)) or self.vdd_v <= 0
        ):
            raise ValueError(f"Technology.vdd_v: expected a positive number of volts or None, got {self.vdd_v!r}")
        scaling.node_factor("energy", self.node_nm, self.vdd_v)  # validates node and supply

    @property
    def effective_vdd_v(self) -> float:
        """The supply in volts (``vdd_v`` or the node's nominal supply)."""
        return scaling.nominal_vdd_v(self.node_nm) if self.vdd_v is None else float(self.vdd_v)


@dataclass(frozen=True)
class Component:
    """One hardware block whose actions cost energy and whose instances cost area.

    Attributes:
        name: unique within an accelerator, e.g. ``"pe_array.mac"``.
        cls: a key of ``energy.COMPONENT_CLASSES`` (e.g. ``"mac"``, ``"sram"``).
        count: number of instances; area and leakage scale with it, dynamic energy
            does not (action counts are totals over all instances).
        attrs: class-specific attributes; stored as a hashable :class:`FrozenMap`.
        technology: process of this component; None = the technology passed to
            ``evaluate``/``area``.
    """

    name: str
    cls: str
    count: int = 1
    attrs: Mapping[str, Any] = field(default_factory=FrozenMap)
    technology: Technology | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"component name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.cls, str):
            raise ValueError(f"component {self.name!r}: class must be a string, got {self.cls!r}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise ValueError(f"component {self.name!r} (class {self.cls!r}): count must be an int >= 0, got {self.count!r}")
        if not isinstance(self.attrs, Mapping):
            raise ValueError(f"component {self.name!r} (class {self.cls!r}): attrs must be a mapping, got {self.attrs!r}")
        if self.technology is not None and not isinstance(self.technology, Technology):
            raise ValueError(f"component {self.name!r}: technology must be a Technology or None")
        if not isinstance(self.attrs, FrozenMap):
            object.__setattr__(self, "attrs", FrozenMap(self.attrs))
