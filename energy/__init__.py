"""archsim energy and area library.

Only this package turns action counts into joules and components into mm².

Public API::

    from archsim.energy import Component, Technology, evaluate, area, EnergyReport, AreaReport, COMPONENT_CLASSES

* ``Component(name, cls, count=1, attrs={...}, technology=None)`` - one block.
* ``evaluate(components, action_counts, latency_s, technology=Technology())`` -> ``EnergyReport``.
* ``prices(components, technology)`` -> ``EnergyPrices``: ``evaluate`` for one fixed set of
  components, resolved once (``.evaluate(action_counts, latency_s)``).
* ``area(components, technology=Technology())`` -> ``AreaReport``.
* ``scale(value, quantity, from_node_nm, to_node_nm, from_vdd_v=None, to_vdd_v=None)`` -
  the one technology-scaling function (Stillmaker & Baas 2017).

Tables and their sources: ``energy.tables``; documentation: ``docs/energy.md``.
"""

from archsim.energy.classes import COMPONENT_CLASSES, ComponentClass, register_component_class
from archsim.energy.component import Component, FrozenMap, Technology
from archsim.energy.report import (
    AreaReport,
    EnergyPrices,
    EnergyReport,
    allowed_actions,
    area,
    area_per_instance_mm2,
    energy_per_action_pj,
    evaluate,
    leakage_per_instance_w,
    prices,
    validate,
)
from archsim.energy.scaling import nominal_vdd_v, scale

__all__ = [
    "COMPONENT_CLASSES",
    "AreaReport",
    "Component",
    "ComponentClass",
    "EnergyPrices",
    "EnergyReport",
    "FrozenMap",
    "Technology",
    "allowed_actions",
    "area",
    "area_per_instance_mm2",
    "energy_per_action_pj",
    "evaluate",
    "leakage_per_instance_w",
    "nominal_vdd_v",
    "prices",
    "register_component_class",
    "scale",
    "validate",
]
