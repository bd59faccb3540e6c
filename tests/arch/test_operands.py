"""``arch.operands``: does an operand format fit a fixed-format multiplier?

Rule (module docstring): no more bits, and a float operand needs a float multiplier.
Each case states the bit widths it relies on.
"""

from __future__ import annotations

import pytest

from archsim.arch.operands import operand_fits, operand_width_problem
from archsim.workloads.formats import get_format


@pytest.mark.parametrize("fmt, hw, fits", [
    ("int8", "int8", True),     # 8 <= 8, both integer
    ("int4", "int8", True),     # 4 <= 8
    ("int8", "int4", False),    # 8 > 4
    ("int8", "bf16", True),     # 8 <= 16, an integer operand is exact on a float multiplier
    ("bf16", "fp16", True),     # 16 <= 16, both float
    ("fp16", "int16", False),   # 16 <= 16 but a float operand on an integer multiplier
    ("fp8_e4m3", "int8", False),  # float on integer
    ("fp32", "bf16", False),    # 32 > 16
])
def test_operand_fits(fmt, hw, fits):
    assert operand_fits(get_format(fmt), get_format(hw)) is fits


def test_first_misfit_is_reported_in_one_wording():
    hw = get_format("int8")
    ops = (("activation", get_format("int8")), ("weight", get_format("fp16")))
    assert (operand_width_problem(ops, hw, "the PE's int8 multiplier")
            == "weight format fp16 is wider than the PE's int8 multiplier")
    both = (("activation", get_format("int16")), ("weight", get_format("fp16")))
    assert operand_width_problem(both, hw, "x").startswith("activation format int16")
    assert operand_width_problem((("activation", hw), ("weight", hw)), hw, "x") is None


def test_the_families_use_it():
    """FPGA and PIM report the same sentence the helper builds (their ``mac_format``)."""
    import archsim
    from archsim.workloads.ops import Gemm

    fpga = archsim.load("sat_vcu1525").units[0]
    g = Gemm(name="g", m=8, n=8, k=8, a_format=get_format("fp32"), w_format=get_format("fp32"))
    hw = fpga.spec.mac_format
    assert fpga.supports(g) == f"activation format fp32 is wider than the PE's {hw.name} multiplier"
    pim = archsim.load("pim_gpt").units[0]
    hw = pim.spec.mac_format
    assert pim.supports(g) == f"activation format fp32 is wider than the bank units' {hw.name}"
