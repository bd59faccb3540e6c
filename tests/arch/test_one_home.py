"""Tables that used to be written by hand in two places now have one home (issue 15, item 5).

Each test states the property the derived copy must keep: the same names in the same
order, the same ids as the source table.
"""

from __future__ import annotations

from archsim.arch import memory
from archsim.arch.pim import kernel as pim_kernel
from archsim.arch.pim.spec import DRAM_ENERGY_TECH
from archsim.energy import tables
from archsim.sim import dram_kernel
from archsim.sim.dram_presets import COMMANDS, PRESETS


def test_memory_techs_are_the_energy_tables_keys_in_order():
    assert memory.DRAM_TECHS == tuple(tables.DRAM_TECHS)


def test_every_dram_preset_names_an_energy_technology():
    for name, p in PRESETS.items():
        assert p["tech"] in tables.DRAM_TECHS, name
    assert set(DRAM_ENERGY_TECH) == set(PRESETS)
    # the four presets and the technologies the PIM family priced them at before
    assert DRAM_ENERGY_TECH == {"GDDR6": "gddr6", "HBM2e": "hbm2e", "HBM3": "hbm3",
                                "DDR4-2400": "ddr4"}


def test_kernel_command_ids_are_the_presets_command_indices():
    """``C_X`` in both Numba kernels is ``COMMANDS.index("X")``; the number of commands is
    the length of ``COMMANDS`` (10: ACT, PRE, RD, WR, REF, PREA, ACTAB, MACAB, WRGB, RDMAC)."""
    for module in (dram_kernel, pim_kernel):
        ids = {n[2:]: getattr(module, n) for n in dir(module)
               if n.startswith("C_") and n[2:] in COMMANDS}
        assert ids, module.__name__
        for cmd, i in ids.items():
            assert COMMANDS[i] == cmd, (module.__name__, cmd, i)
    assert dram_kernel.N_CMD == len(COMMANDS) == 10
    assert {n[2:] for n in dir(pim_kernel) if n.startswith("C_")} == {
        "ACT", "PRE", "WR", "REF", "PREA", "ACTAB", "MACAB", "WRGB", "RDMAC"}
