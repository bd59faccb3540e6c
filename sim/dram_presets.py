"""DRAM standards as data: command set, timing-constraint tables and presets.

A DRAM standard is a **table of timing constraints**, not code. Each row reads

    (level, preceding command, following command, latency expression[, window])

and means: after ``preceding`` is issued at time ``t`` to some node of ``level``
(``channel``, ``rank``, ``bankgroup`` or ``bank``), ``following`` may not be issued to
any bank (or wider scope) under that same node before ``t + latency``. ``latency`` is a
sum/difference of JEDEC timing names and integers (``"nCWL + nBL + nWR"``), evaluated
once in Python against the preset. A row with ``window = w > 1`` is a rolling-window
constraint: the ``(w+1)``-th ``following`` must wait ``latency`` after the oldest of the
last ``w`` ``preceding`` commands (``nFAW`` with ``w = 4``).

All latencies are in DRAM clock cycles (tCK). Sources are cited next to each preset.
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------- commands
#: Command names; the index in this tuple is the command id used by the kernel.
#: ACT/PRE/RD/WR/REF are issued by the request controller. PREA and the PIM commands
#: (all-bank activate, all-bank MAC, write global buffer, read MAC result) are reserved
#: for a processing-in-memory model driving :class:`sim.dram.DramState` directly.
COMMANDS: Final[tuple[str, ...]] = (
    "ACT", "PRE", "RD", "WR", "REF", "PREA", "ACTAB", "MACAB", "WRGB", "RDMAC",
)
ACT, PRE, RD, WR, REF, PREA, ACTAB, MACAB, WRGB, RDMAC = range(len(COMMANDS))
N_COMMANDS: Final[int] = len(COMMANDS)

#: Hierarchy levels, coarse to fine; the index is the level id.
LEVELS: Final[tuple[str, ...]] = ("channel", "rank", "bankgroup", "bank")

#: Scope of each command: the level of the node it addresses. A rank-scope command
#: (REF, PREA, ACTAB, ...) acts on every bank of the rank.
COMMAND_SCOPE: Final[dict[str, str]] = {
    "ACT": "bank", "PRE": "bank", "RD": "bank", "WR": "bank", "REF": "rank",
    "PREA": "rank", "ACTAB": "rank", "MACAB": "rank", "WRGB": "rank", "RDMAC": "rank",
}

# ------------------------------------------------------------------- timing table
TimingRow = tuple  # (level, prev, next, latency_expr) or (..., window)

#: JEDEC-style constraint table shared by DDR4, HBM2e, HBM3 and GDDR6 (HBM and GDDR6
#: have no ranks; they are modelled with ``ranks = 1`` so the rank rows bind the
#: channel). Structure follows JESD79-4 (DDR4) section 13 / JESD235 / JESD250; the
#: read-to-write turnaround ``nCL + nBL + 2 - nCWL`` is the usual bus-turnaround bound.
JEDEC_TIMING_TABLE: Final[tuple[TimingRow, ...]] = (
    # channel: data-bus occupancy (one burst at a time)
    ("channel", "RD", "RD", "nBL"),
    ("channel", "WR", "WR", "nBL"),
    # rank: column-to-column, turnaround, activate spacing, refresh
    ("rank", "RD", "RD", "nCCDS"),
    ("rank", "WR", "WR", "nCCDS"),
    ("rank", "RD", "WR", "nCL + nBL + 2 - nCWL"),
    ("rank", "WR", "RD", "nCWL + nBL + nWTRS"),
    ("rank", "ACT", "ACT", "nRRDS"),
    ("rank", "ACT", "ACT", "nFAW", 4),
    ("rank", "ACT", "PREA", "nRAS"),
    ("rank", "RD", "PREA", "nRTP"),
    ("rank", "WR", "PREA", "nCWL + nBL + nWR"),
    ("rank", "PRE", "REF", "nRP"),
    ("rank", "PREA", "REF", "nRP"),
    ("rank", "PREA", "ACT", "nRP"),
    ("rank", "REF", "ACT", "nRFC"),
    ("rank", "REF", "REF", "nRFC"),
    # bank group: long column-to-column and activate spacing
    ("bankgroup", "RD", "RD", "nCCDL"),
    ("bankgroup", "WR", "WR", "nCCDL"),
    ("bankgroup", "WR", "RD", "nCWL + nBL + nWTRL"),
    ("bankgroup", "ACT", "ACT", "nRRDL"),
    # bank: row cycle
    ("bank", "ACT", "ACT", "nRC"),
    ("bank", "ACT", "RD", "nRCDRD"),
    ("bank", "ACT", "WR", "nRCDWR"),
    ("bank", "ACT", "PRE", "nRAS"),
    ("bank", "PRE", "ACT", "nRP"),
    ("bank", "RD", "PRE", "nRTP"),
    ("bank", "WR", "PRE", "nCWL + nBL + nWR"),
    # PIM rows (AiM-style all-bank operation; issued only through DramState). A PIM
    # model may append rows for its own latencies (e.g. MAC pipeline depth).
    ("rank", "PRE", "ACTAB", "nRP"),
    ("rank", "PREA", "ACTAB", "nRP"),
    ("rank", "REF", "ACTAB", "nRFC"),
    ("rank", "ACTAB", "ACTAB", "nRC"),
    ("rank", "ACTAB", "MACAB", "nRCDRD"),
    ("rank", "ACTAB", "PREA", "nRAS"),
    ("rank", "MACAB", "MACAB", "nCCDL"),
    ("rank", "MACAB", "PREA", "nRTP"),
    ("rank", "WRGB", "WRGB", "nCCDL"),
    ("rank", "WRGB", "MACAB", "nCWL + nBL"),
    ("rank", "MACAB", "RDMAC", "nCCDL"),
)

TIMING_TABLES: Final[dict[str, tuple[TimingRow, ...]]] = {"jedec": JEDEC_TIMING_TABLE}

#: Timing names every preset must define (in tCK).
REQUIRED_TIMINGS: Final[tuple[str, ...]] = (
    "nBL", "nCL", "nCWL", "nRCDRD", "nRCDWR", "nRP", "nRAS", "nRC", "nWR", "nRTP",
    "nCCDS", "nCCDL", "nRRDS", "nRRDL", "nWTRS", "nWTRL", "nFAW", "nRFC", "nREFI",
)

# ------------------------------------------------------------------------ presets
#: Presets: organisation + timing (all counts in tCK, tCK in ps). ``BL`` is the burst
#: length in data beats (column addresses per burst); ``nBL`` the data-bus time of one
#: burst in tCK. ``columns`` counts column addresses per row, so a row holds
#: ``columns // BL`` bursts of ``burst_bytes``. ``tech`` names the preset's DRAM technology
#: as the energy library spells it (a key of ``energy.tables.DRAM_TECHS``; sim does not
#: import energy, ``tests/arch/test_one_home.py`` checks the names).
PRESETS: Final[dict[str, dict]] = {
    # DDR4-2400R (16-16-16), x64 channel of 8 Gb x8 devices, 1 rank.
    # Source: JESD79-4B speed bin DDR4-2400R (tCK 0.833 ns), tRRD_S/L, tFAW for 1 KB
    # page (x8), tRFC1 = 350 ns for 8 Gb, tREFI = 7.8 us; same numbers as Ramulator's
    # DDR4_2400R preset. 8 Gb x8: 4 BG x 4 banks, 65536 rows, 1024 columns.
    "DDR4-2400": {
        "tech": "ddr4",
        "channels": 1, "ranks": 1, "bankgroups": 4, "banks": 4,
        "rows": 65536, "columns": 1024, "BL": 8, "burst_bytes": 64, "tCK_ps": 833,
        "timing": {
            "nBL": 4, "nCL": 16, "nCWL": 12, "nRCDRD": 16, "nRCDWR": 16, "nRP": 16,
            "nRAS": 39, "nRC": 55, "nWR": 18, "nRTP": 9, "nCCDS": 4, "nCCDL": 6,
            "nRRDS": 4, "nRRDL": 6, "nWTRS": 3, "nWTRL": 9, "nFAW": 26,
            "nRFC": 420, "nREFI": 9363,
        },
        "address_mapping": "ro-ba-ra-co-bg-ch",
    },
    # HBM2e, one 8-high stack at 3.2 Gb/s/pin: 8 channels x 2 pseudo-channels of 64 bit,
    # BL4 -> 32 B per burst, CK 1.6 GHz (tCK 0.625 ns), 4 BG x 4 banks per PC, 1 KB
    # page. Peak 16 x 32 B / (2 x 0.625 ns) = 409.6 GB/s. Source: JESD235C structure,
    # SK hynix HBM2E datasheet-class ns values (tRCD 14 ns, tRP 14 ns, tRAS 33 ns,
    # tRC 47 ns, tCL 14 ns, tWR 15 ns, tRRDS 2.5 ns, tRRDL 3.75 ns, tFAW 16 ns,
    # tRFC 350 ns, tREFI 3.9 us) rounded up to tCK.
    "HBM2e": {
        "tech": "hbm2e",
        "channels": 16, "ranks": 1, "bankgroups": 4, "banks": 4,
        "rows": 16384, "columns": 128, "BL": 4, "burst_bytes": 32, "tCK_ps": 625,
        "timing": {
            "nBL": 2, "nCL": 23, "nCWL": 7, "nRCDRD": 23, "nRCDWR": 16, "nRP": 23,
            "nRAS": 53, "nRC": 76, "nWR": 24, "nRTP": 8, "nCCDS": 2, "nCCDL": 4,
            "nRRDS": 4, "nRRDL": 6, "nWTRS": 4, "nWTRL": 12, "nFAW": 26,
            "nRFC": 560, "nREFI": 6240,
        },
        "address_mapping": "ro-ba-ra-co-bg-ch",
    },
    # HBM3 at 6.4 Gb/s/pin: 16 channels x 2 pseudo-channels of 32 bit, BL8 -> 32 B per
    # burst, 4 beats per tCK at tCK 0.625 ns -> nBL 2. Peak 32 x 32 B / 1.25 ns =
    # 819.2 GB/s per stack. Source: JESD238 organisation; core timings in ns as for
    # HBM2e (the DRAM core is the same generation), rounded up to tCK.
    "HBM3": {
        "tech": "hbm3",
        "channels": 32, "ranks": 1, "bankgroups": 4, "banks": 4,
        "rows": 16384, "columns": 256, "BL": 8, "burst_bytes": 32, "tCK_ps": 625,
        "timing": {
            "nBL": 2, "nCL": 23, "nCWL": 8, "nRCDRD": 23, "nRCDWR": 16, "nRP": 23,
            "nRAS": 53, "nRC": 76, "nWR": 26, "nRTP": 8, "nCCDS": 2, "nCCDL": 4,
            "nRRDS": 4, "nRRDL": 6, "nWTRS": 4, "nWTRL": 12, "nFAW": 26,
            "nRFC": 560, "nREFI": 6240,
        },
        "address_mapping": "ro-ba-ra-co-bg-ch",
    },
    # GDDR6 as in the SK hynix AiM public simulator (Ramulator 2 based), timing verbatim:
    # {tCK_ps: 570, BL: 8, nCL: 24, nRCDRD: 26, nRCDWR: 16, nRP: 26, nRAS: 53, nRC: 79,
    #  nWR: 26, nRTP: 4, nCWL: 6, nCCDS: 4, nCCDL: 6, nRRDS: 7, nRRDL: 7, nWTRS: 9,
    #  nWTRL: 11, nFAW: 28, nRFC: 210, nRFCpb: 105, nREFI: 3333}
    # 4 BG x 4 banks, 16384 rows, 1024 columns, x16 channel.
    # AiM's "BL: 8" counts WCK cycles; WCK = 4 x CK here, so one BL16 burst
    # (16 beats x 16 DQ = 32 B) holds the data bus for nBL = 8 / 4 = 2 tCK. The column
    # rate is bound by nCCDS = 4 tCK, so the peak is 32 B / (4 x 0.57 ns) = 14.0 GB/s
    # per channel. 16 channels = PIM-GPT's 8 AiM devices x 2 channels.
    "GDDR6": {
        "tech": "gddr6",
        "channels": 16, "ranks": 1, "bankgroups": 4, "banks": 4,
        "rows": 16384, "columns": 1024, "BL": 16, "burst_bytes": 32, "tCK_ps": 570,
        "timing": {
            "nBL": 2, "nCL": 24, "nCWL": 6, "nRCDRD": 26, "nRCDWR": 16, "nRP": 26,
            "nRAS": 53, "nRC": 79, "nWR": 26, "nRTP": 4, "nCCDS": 4, "nCCDL": 6,
            "nRRDS": 7, "nRRDL": 7, "nWTRS": 9, "nWTRL": 11, "nFAW": 28,
            "nRFC": 210, "nRFCpb": 105, "nREFI": 3333,
        },
        "address_mapping": "ro-ba-ra-co-bg-ch",
    },
}
