"""Technology scaling: the one function that moves a figure between nodes.

``scale(value, quantity, from_node_nm, to_node_nm, from_vdd_v, to_vdd_v)`` returns
``value * F_q(to_node, to_vdd) / F_q(from_node, from_vdd)`` where ``F_q`` is the
per-node factor of Stillmaker & Baas (Integration 58, 2017):

* ``energy``: ``a V² + b V + c`` (their Table of energy coefficients),
* ``delay``:  ``a V³ + b V² + c V + d``,
* ``power``:  ``a V² + b V + c`` (used for leakage power per instance),
* ``area``:   their area-scaling table (voltage independent).

For 45 nm and below the HP-device rows are used (accelerators are high-performance
designs).  ``vdd=None`` means the node's nominal supply (``nominal_vdd_v``).

Nodes between table entries (e.g. 28, 22, 12 nm) are interpolated linearly in
``(log node, log F)``; the nominal supply of an interpolated node is interpolated
linearly, and each neighbouring fit is evaluated at the same fraction of its own
nominal supply.

Below 7 nm (the paper's last node) the factor is extrapolated as a power law in the
node, ``F(n) = F(7 nm, V) * (n / 7)^k``, with ``k`` the log-log slope of the nominal
factors between 10 nm and 7 nm (energy k~1.08, area k~1.48, delay k~0.48, power
k~1.06).  This gives 5 nm area 0.036x and energy 0.70x of 7 nm, in line with foundry
claims for N5 vs N7 (~1.8x density, ~30% less power).  Supported range: 3-180 nm.

Known limitation: the paper's delay fits are not monotone between 32 nm (PTM) and
20 nm (ITRS); energy, power at nominal supply and area are monotone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from archsim.energy import tables

__all__ = ["Quantity", "QUANTITIES", "MIN_NODE_NM", "MAX_NODE_NM", "scale", "node_factor", "nominal_vdd_v"]

Quantity = Literal["energy", "area", "delay", "power"]
QUANTITIES: tuple[str, ...] = ("energy", "area", "delay", "power")
MIN_NODE_NM = 3.0
MAX_NODE_NM = 180.0
# The polynomial fits are only meaningful near each node's nominal supply.
_VDD_MIN_FRACTION = 0.6
_VDD_MAX_FRACTION = 1.3

_NODES: tuple[float, ...] = tuple(float(n) for n in tables.STILLMAKER_NODES_NM)  # descending
_LAST = _NODES[-1]  # 7 nm
_PREV = _NODES[-2]  # 10 nm


def _poly(coeffs: Sequence[float], v: float) -> float:
    result = 0.0
    for c in coeffs:
        result = result * v + c
    return result


def _table_factor(quantity: str, node: float, vdd: float) -> float:
    """Factor at a node that is exactly in the Stillmaker table."""
    key = int(node)
    if quantity == "area":
        return tables.STILLMAKER_AREA_REL_45[key]
    if quantity == "energy":
        return _poly(tables.STILLMAKER_ENERGY_POLY[key], vdd)
    if quantity == "delay":
        return _poly(tables.STILLMAKER_DELAY_POLY[key], vdd)
    return _poly(tables.STILLMAKER_POWER_POLY[key], vdd)


def _check_node(node_nm: float) -> float:
    node = float(node_nm)
    if not (MIN_NODE_NM <= node <= MAX_NODE_NM) or math.isnan(node):
        raise ValueError(
            f"technology node {node_nm!r} nm outside the supported range "
            f"{MIN_NODE_NM:g}-{MAX_NODE_NM:g} nm (Stillmaker & Baas 180-7 nm, extrapolated below 7 nm)"
        )
    return node


def nominal_vdd_v(node_nm: float) -> float:
    """Nominal supply (V) of a node: table value, interpolated between nodes, 0.7 V below 7 nm.

    Source: ``tables.NOMINAL_VDD_SOURCE`` (45 nm is 0.9 V, the Horowitz operating point).
    """
    node = _check_node(node_nm)
    nominal: Mapping[float, float] = tables.NOMINAL_VDD_V
    if node <= _LAST:
        return nominal[int(_LAST)]
    for hi, lo in zip(_NODES, _NODES[1:]):
        if lo <= node <= hi:
            if node == hi:
                return nominal[int(hi)]
            if node == lo:
                return nominal[int(lo)]
            t = (node - hi) / (lo - hi)
            return nominal[int(hi)] + t * (nominal[int(lo)] - nominal[int(hi)])
    raise AssertionError("unreachable: node range checked")  # pragma: no cover


def _extrapolation_exponent(quantity: str) -> float:
    f_prev = _table_factor(quantity, _PREV, tables.NOMINAL_VDD_V[int(_PREV)])
    f_last = _table_factor(quantity, _LAST, tables.NOMINAL_VDD_V[int(_LAST)])
    return math.log(f_prev / f_last) / math.log(_PREV / _LAST)


def node_factor(quantity: str, node_nm: float, vdd_v: float | None = None) -> float:
    """The per-node factor ``F_q(node, V)`` of the module docstring (relative units).

    Args:
        quantity: 'energy' | 'area' | 'delay' | 'power'.
        node_nm: technology node, 3-180 nm.
        vdd_v: supply in volts; None = ``nominal_vdd_v(node_nm)``. Ignored for 'area'.

    Raises:
        ValueError: unknown quantity, node out of range, or a supply outside
            0.6-1.3x the node's nominal supply.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown scaling quantity {quantity!r}; allowed: {', '.join(QUANTITIES)}")
    node = _check_node(node_nm)
    nominal = nominal_vdd_v(node)
    vdd = nominal if vdd_v is None else float(vdd_v)
    if quantity != "area" and not (
        _VDD_MIN_FRACTION * nominal <= vdd <= _VDD_MAX_FRACTION * nominal
    ):
        raise ValueError(
            f"supply {vdd_v!r} V at {node_nm:g} nm outside the fitted range "
            f"{_VDD_MIN_FRACTION * nominal:.3g}-{_VDD_MAX_FRACTION * nominal:.3g} V "
            f"(0.6-1.3x the nominal {nominal:g} V)"
        )
    if node < _LAST:
        # nominal below 7 nm is the 7 nm nominal, so vdd is already in the 7 nm fit's range
        k = _extrapolation_exponent(quantity)
        return _table_factor(quantity, _LAST, vdd) * (node / _LAST) ** k
    for hi, lo in zip(_NODES, _NODES[1:]):
        if node == hi:
            return _table_factor(quantity, hi, vdd)
        if node == lo:
            return _table_factor(quantity, lo, vdd)
        if lo < node < hi:
            # each neighbour's fit is evaluated at the same supply *relative to its own
            # nominal supply*, so that both stay inside their fitted voltage ranges
            rel = vdd / nominal
            f_hi = _table_factor(quantity, hi, rel * tables.NOMINAL_VDD_V[int(hi)])
            f_lo = _table_factor(quantity, lo, rel * tables.NOMINAL_VDD_V[int(lo)])
            t = math.log(hi / node) / math.log(hi / lo)
            return math.exp(math.log(f_hi) + t * (math.log(f_lo) - math.log(f_hi)))
    raise AssertionError("unreachable: node range checked")  # pragma: no cover


def scale(
    value: float,
    quantity: str,
    from_node_nm: float,
    to_node_nm: float,
    from_vdd_v: float | None = None,
    to_vdd_v: float | None = None,
) -> float:
    """Scale a figure between technology nodes (and supplies).

    ``value * F(to_node, to_vdd) / F(from_node, from_vdd)`` with ``F`` from
    :func:`node_factor` (Stillmaker & Baas 2017).  Identity when node and supply are
    equal.  Energy, area and power shrink monotonically with the node at nominal supply.

    Args:
        value: the figure at ``from_node_nm`` (any unit; returned in the same unit).
        quantity: 'energy' | 'area' | 'delay' | 'power'.
        from_node_nm: node of ``value``.
        to_node_nm: target node.
        from_vdd_v: supply of ``value``; None = nominal supply of ``from_node_nm``.
        to_vdd_v: target supply; None = nominal supply of ``to_node_nm``.

    Returns:
        The scaled figure.

    Raises:
        ValueError: see :func:`node_factor`; the factor must be positive.
    """
    f_from = node_factor(quantity, from_node_nm, from_vdd_v)
    f_to = node_factor(quantity, to_node_nm, to_vdd_v)
    if f_from <= 0.0 or f_to <= 0.0:
        raise ValueError(
            f"non-positive {quantity} scaling factor between {from_node_nm:g} nm and "
            f"{to_node_nm:g} nm at the given supplies (outside the fits' validity)"
        )
    if f_from == f_to:
        return float(value)
    return float(value) * f_to / f_from
