"""Ramulator 2 measured side by side with archsim's DRAM controller (issue 30, item 2).

Run (core 1 only; the machine is shared)::

    taskset -c 1 python3 benchmarks/peer_ramulator2.py --ramulator /tmp/r7peer/ramulator2 \
        [--requests 200000] [--repeat 3]

The same traffic as ``benchmarks/bench_sim.py`` (``bench_dram``): per standard, 200,000
one-burst requests, all arrived at cycle 0, 30 % writes, sequential then uniform random
over the device's bursts (one ``np.random.default_rng(0)`` per standard, drawn in that
order), 16 requests waiting for a queue slot at most. Each request array is written as a
Ramulator trace (``LD <addr>`` / ``ST <addr>``, its ``LoadStoreTrace`` format) with every
address re-encoded so that Ramulator's ``CacheLineInterleave`` + ``RoBaRaCoCh`` mapping
lands it on the same channel, rank, bank group, bank, row and column as our
``ro-ba-ra-co-bg-ch`` mapping does: both simulators see the identical per-bank request
streams. Ramulator runs through ``peer_ramulator2_driver.cpp`` (ours; Ramulator 2.1 has no
standalone binary), which replays the trace the way ``simulate_requests(...,
max_outstanding=16)`` does and stops when the last request completes. Ramulator's
configuration (their Python API, exported to YAML by their ``python3 -m ramulator
export``): the standard's org preset closest to our preset, its timing preset with every
timing our preset shares overridden to our value, FR-FCFS, open rows, all-bank refresh,
read and write buffers of 32 (our one queue: 32), one controller per channel. The
differences are listed by :data:`PEERS` and printed.

Figures: commands ours = ``sum(stats.command_counts.values())``; commands peer = the sum
of Ramulator's ``CommandCounter`` plugin over every command of the standard (a separate,
untimed run: the timed runs carry no plugin). CPU seconds: ours = ``time.process_time``
around ``simulate_requests`` (Numba cache warm); peer = the driver process's CPU seconds
(``getrusage(RUSAGE_CHILDREN)``) minus those of the same run on a 16-request trace
(start-up: library load, YAML parse, object construction), and, as a check, the CPU
seconds of the driver's simulation loop alone (``std::clock``; excludes the trace load).
Each is the best of ``--repeat``. Numbers are printed, never asserted (STYLE.md).

Build of the peer (Ramulator 2.1, github.com/CMU-SAFARI/ramulator2 commit c5b1c3a;
g++ 12.2, cmake 3.25, ninja; no network: the dependencies from local mirrors)::

    git clone /work/.mirror/CMU-SAFARI+ramulator2/repo /tmp/r7peer/ramulator2
    cd /tmp/r7peer/ramulator2
    git clone --branch yaml-cpp-0.9.0 /work/.mirror/jbeder+yaml-cpp/repo ext/yaml-cpp
    git clone --branch 10.2.1 /work/.mirror/fmtlib+fmt/repo ext/fmt
    mkdir build && cd build
    cmake .. -G Ninja -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
        -DRAMULATOR_PYTHON_BINDINGS=OFF -DCMAKE_BUILD_TYPE=Release   # -O3 -DNDEBUG
    taskset -c 1 nice ninja -j1            # -> /tmp/r7peer/ramulator2/libramulator.so

This script then compiles the driver once into ``<ramulator>/build/archsim_peer_driver``
(``g++ -std=c++20 -O3 -DNDEBUG``, linked against ``libramulator.so`` and the built fmt
and yaml-cpp) and exports the configs with ``PYTHONPATH=<ramulator>/python`` (their pure
Python package; the nanobind extension is not needed for export).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_sim import dram_traffic  # noqa: E402  (the traffic of the DRAM figures)

from archsim.sim import DramSpec, dram_preset, simulate_requests  # noqa: E402

HERE = Path(__file__).resolve().parent
DRIVER_SRC = HERE / "peer_ramulator2_driver.cpp"
RAMULATOR_COMMIT = "c5b1c3a"
WINDOW = 16  # requests waiting for a queue slot (our max_outstanding)
STARTUP_REQUESTS = 16


@dataclass(frozen=True)
class Peer:
    """How one of our presets is configured in Ramulator 2.

    ``levels``: Ramulator's levels below the channel, LSB first as its ``RoBaRaCoCh``
    slices them above the column, each with our field name (``None``: a level we lack,
    size 1). ``rename``: our timing name -> theirs where they differ. ``org``: org
    overrides. ``notes``: the configuration differences that remain."""

    ours: str
    standard: str
    org_preset: str
    timing_preset: str
    controller: str
    levels: tuple[tuple[str, str | None], ...]
    rename: tuple[tuple[str, str], ...] = ()
    org: tuple[tuple[str, int], ...] = ()
    notes: str = ""


PEERS = (
    Peer("DDR4-2400", "DDR4", "DDR4_8Gb_x8", "DDR4_2400R", "GenericDDR",
         (("Rank", "ra"), ("BankGroup", "bg"), ("Bank", "ba"), ("Row", "ro")),
         rename=(("nRCDRD", "nRCD"),),
         notes="1 channel x 1 rank x 4 BG x 4 banks, 65536 rows x 128 bursts of 64 B (x8 "
               "8Gb); nRCDWR = nRCDRD (16) so their one nRCD; their nCS (2) kept"),
    Peer("HBM2e", "HBM2", "HBM2_2Gb", "HBM2_2400Mbps", "HBM12",
         (("PseudoChannel", None), ("BankGroup", "bg"), ("Bank", "ba"), ("Row", "ro")),
         rename=(("nRTP", "nRTPL"),), org=(("pseudochannel", 1),),
         notes="their HBM2 (no HBM2e): 16 channels x 1 pseudo-channel (org override "
               "pseudochannel=1: our 16 independent channels, each its own command bus) x "
               "4 BG x 4 banks, 16384 rows x 32 bursts of 32 B; their HBM12 controller "
               "issues up to 2 commands a cycle (row bus + column bus), ours 1; their "
               "nRFCpb / nRREFD / nREFIpb (per-bank refresh) unused"),
    Peer("GDDR6", "GDDR6", "GDDR6_8Gb_x16", "GDDR6_14000_1350mV_double", "GenericDDR",
         (("BankGroup", "bg"), ("Bank", "ba"), ("Row", "ro")),
         rename=(("nRFC", "nRFCab"),),
         notes="16 channels (x16, 16 bits each) x 4 BG x 4 banks, 16384 rows x 64 bursts of "
               "32 B; their nRREFD / nPPD kept (per-bank refresh, PRE-to-PRE)"),
)


class PeerError(Exception):
    """The peer cannot run: a message naming ``--ramulator``."""


# --- traffic ------------------------------------------------------------------------------


def _counts(spec: DramSpec) -> dict[str, int]:
    return {"ch": spec.channels, "ra": spec.ranks, "bg": spec.bankgroups, "ba": spec.banks,
            "ro": spec.rows, "co": spec.bursts_per_row}


def decode(spec: DramSpec, addr: np.ndarray) -> dict[str, np.ndarray]:
    """Our address mapping (``spec.address_mapping``, MSB first): byte addresses ->
    ``{field: index}`` (the inverse of ``sim.dram.encode_address``)."""
    idx = np.asarray(addr, np.int64) // spec.burst_bytes
    counts = _counts(spec)
    out = {}
    for f in spec.address_mapping.split("-")[::-1]:  # LSB first
        out[f] = idx % counts[f]
        idx = idx // counts[f]
    return out


def peer_address(spec: DramSpec, peer: Peer, addr: np.ndarray) -> np.ndarray:
    """Byte addresses for Ramulator that its ``CacheLineInterleave`` channel mapper and
    ``RoBaRaCoCh`` address mapper decode to the burst ``addr`` is in our mapping: from
    the LSB, the transaction offset, channel, column, then ``peer.levels``."""
    f = decode(spec, addr)
    counts = _counts(spec)
    out = np.zeros(len(addr), np.int64)
    for _level, field in reversed(peer.levels):  # MSB first
        size = counts[field] if field else 1
        out = out * size + (f[field] if field else 0)
    out = out * counts["co"] + f["co"]
    out = out * counts["ch"] + f["ch"]
    return out * spec.burst_bytes


def write_trace(path: Path, addr: np.ndarray, is_write: np.ndarray) -> None:
    """Ramulator's ``LoadStoreTrace`` format: ``LD <addr>`` / ``ST <addr>`` per line."""
    ops = np.where(np.asarray(is_write, bool), "ST", "LD")
    path.write_text("".join(f"{o} {int(a)}\n" for o, a in zip(ops, addr)))


def read_trace(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(addresses, is_write) of a trace written by :func:`write_trace`."""
    ops, addr = [], []
    for line in path.read_text().splitlines():
        op, a = line.split()
        ops.append(op == "ST")
        addr.append(int(a))
    return np.asarray(addr, np.int64), np.asarray(ops, bool)


# --- configuration ------------------------------------------------------------------------


def timing_overrides(spec: DramSpec, peer: Peer, their_params: list[str]) -> tuple[dict, list]:
    """(overrides, our timings with no counterpart): each of our timings under its name
    (or ``peer.rename``) when the standard has it, and tCK_ps. (Their ``rate``, a label
    no timing constraint reads, stays the preset's.)"""
    rename = dict(peer.rename)
    over, missing = {}, []
    for k, v in spec.timing.items():
        name = rename.get(k, k)
        if name in their_params:
            over[name] = int(v)
        elif k != "nRCDWR" or spec.timing["nRCDWR"] != spec.timing["nRCDRD"]:
            missing.append(k)
    over["tCK_ps"] = spec.tck_ps
    return over, missing


def config_script(spec: DramSpec, peer: Peer, overrides: dict, count_dir: Path | None,
                  trace: Path | None = None) -> str:
    """A Ramulator 2 Python config (their API) for ``python3 -m ramulator export``: the
    ``External`` frontend (the driver replays), or with ``trace`` their ``LoadStoreTrace``;
    with ``count_dir`` a ``CommandCounter`` per channel writing ``count_dir/ch<i>.csv``."""
    kw = ", ".join(f"{k}={v!r}" for k, v in [*peer.org, *overrides.items()])
    plugins = "[]"
    if count_dir is not None:
        plugins = (f"[ramulator.controller_plugin.CommandCounter(commands_to_count=list("
                   f"ramulator.dram.{peer.standard}.commands), path="
                   f"{str(count_dir)!r} + f'/ch{{i}}.csv')]")
    frontend = "ramulator.frontend.External(clock_ratio=1)"
    if trace is not None:
        frontend = f"ramulator.frontend.LoadStoreTrace(clock_ratio=1, path={str(trace)!r})"
    return f"""import ramulator
dram = ramulator.dram.{peer.standard}(org_preset={peer.org_preset!r},
    timing_preset={peer.timing_preset!r}, {kw})
ctrls = [ramulator.controller.{peer.controller}(dram=dram,
    scheduler=ramulator.scheduler.FRFCFS(), refresh_manager=ramulator.refresh_manager.AllBank(),
    row_policy=ramulator.row_policy.Open(), addr_mapper=ramulator.addr_mapper.RoBaRaCoCh(),
    read_buffer_size=32, write_buffer_size=32, controller_plugins={plugins})
    for i in range({spec.channels})]
mem = ramulator.memory_system.GenericDRAM(clock_ratio=1, controllers=ctrls,
    channel_mapper=ramulator.channel_mapper.CacheLineInterleave())
sim = ramulator.Simulation({frontend}, mem)
"""


# --- the peer's output --------------------------------------------------------------------


@dataclass(frozen=True)
class PeerRun:
    """One driver run: its own summary line and Ramulator's controller statistics."""

    requests: int
    completed: int
    cycles: int
    loop_cpu_s: float
    stats: dict[str, int]   # summed over the controllers (channels)


_STATS = ("row_hits", "row_misses", "row_conflicts", "num_read_reqs", "num_write_reqs",
          "num_read_reqs_served", "num_write_reqs_served", "num_maintenance_reqs_served",
          "num_read_reqs_forwarded", "num_write_reqs_coalesced")


def parse_output(text: str) -> PeerRun:
    """The driver's ``archsim-peer:`` line and the controller counters of Ramulator's
    statistics (``  name: value`` lines; summed over every controller)."""
    m = re.search(r"archsim-peer: requests=(\d+) completed=(\d+) cycles=(\d+) "
                  r"loop_cpu_s=([0-9.]+)", text)
    if not m:
        raise PeerError("--ramulator: the driver printed no 'archsim-peer:' line")
    stats = dict.fromkeys(_STATS, 0)
    for k, v in re.findall(r"^\s+(\w+):\s+(\d+)\s*$", text, re.M):
        if k in stats:
            stats[k] += int(v)
    return PeerRun(int(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4)),
                   stats)


def parse_counts(paths: list[Path]) -> dict[str, int]:
    """Command counts of the ``CommandCounter`` CSVs (``CMD, count`` lines), summed."""
    out: dict[str, int] = {}
    for p in paths:
        for line in p.read_text().splitlines():
            if line.strip():
                cmd, n = (s.strip() for s in line.split(","))
                out[cmd] = out.get(cmd, 0) + int(n)
    return out


# --- running ------------------------------------------------------------------------------


def build_driver(root: Path) -> Path:
    """The driver binary in ``root/build`` (compiled when missing or older than its
    source)."""
    lib = root / "libramulator.so"
    fmt_lib = root / "build/_deps/fmt-build/libfmt.a"
    yaml_lib = root / "build/_deps/yaml-cpp-build/libyaml-cpp.a"
    for p in (lib, root / "src/ramulator/base/config.h", root / "python/ramulator",
              fmt_lib, yaml_lib):
        if not p.exists():
            raise PeerError(f"--ramulator {root}: no {p.relative_to(root)} (build Ramulator "
                            f"2 as this script's docstring says)")
    exe = root / "build/archsim_peer_driver"
    if exe.exists() and exe.stat().st_mtime >= DRIVER_SRC.stat().st_mtime:
        return exe
    cmd = ["g++", "-std=c++20", "-O3", "-DNDEBUG", f"-I{root / 'src'}",
           f"-I{root / 'ext/fmt/include'}", f"-I{root / 'ext/yaml-cpp/include'}",
           str(DRIVER_SRC), "-o", str(exe), f"-L{root}", "-lramulator", str(fmt_lib),
           str(yaml_lib), f"-Wl,-rpath,{root}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise PeerError(f"--ramulator {root}: compiling the driver failed: "
                        f"{p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return exe


def export_config(root: Path, script: str, out: Path) -> None:
    """Their ``python3 -m ramulator export`` of ``script`` into ``out``."""
    src = out.with_suffix(".py")
    src.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    p = subprocess.run([sys.executable, "-m", "ramulator", "export", str(src), "-o", str(out)],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        tail = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else str(p.returncode)
        raise PeerError(f"--ramulator {root}: exporting a config failed: {tail}")


def their_timing_params(root: Path) -> dict[str, list[str]]:
    """Each peer standard's timing names, from their Python package (a subprocess)."""
    code = ("import json, ramulator; print(json.dumps({s: list(getattr(ramulator.dram, s)."
            f"timing_params) for s in {[p.standard for p in PEERS]!r}}}))")
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise PeerError(f"--ramulator {root}: its Python package (python/ramulator) does not "
                        f"import")
    return json.loads(p.stdout)


def run_driver(exe: Path, config: Path, trace: Path, window: int) -> tuple[float, PeerRun]:
    """(CPU seconds of the process, its output) of one driver run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([str(exe), str(config), str(trace), str(window)],
                       capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()
        raise PeerError(f"--ramulator: the driver failed (exit {p.returncode}): "
                        f"{tail[-1] if tail else ''}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, parse_output(p.stdout)


def ours(spec: DramSpec, addr: np.ndarray, wr: np.ndarray, repeat: int):
    """(best CPU seconds, commands, command counts, makespan cycles, row hits / misses /
    conflicts) of our controller on the arrays."""
    best, res = float("inf"), None
    for _ in range(repeat):
        c0 = time.process_time()
        res = simulate_requests(spec, addr, wr, np.zeros(len(addr), np.int64),
                                max_outstanding=WINDOW)
        best = min(best, time.process_time() - c0)
    counts = dict(res.stats.command_counts)
    st = res.stats
    return (best, sum(counts.values()), counts, res.makespan_cycles,
            (st.row_hits, st.row_misses, st.row_conflicts))


@dataclass(frozen=True)
class PeerFigure:
    """One peer mode on one trace: commands issued, CPU seconds (process minus start-up,
    and the simulation loop alone), the untimed counting run's output."""

    commands: int
    counts: dict[str, int]
    cpu_s: float
    loop_cpu_s: float
    startup_cpu_s: float
    run: PeerRun


def peer_figure(root: Path, exe: Path, work: Path, name: str, scripts: tuple[str, str, str],
                traces: tuple[Path, Path], window: int, repeat: int) -> PeerFigure:
    """Export the (timed, tiny, counting) configs ``scripts`` and run the driver: best of
    ``repeat`` on ``traces[0]`` and on the tiny ``traces[1]``, one counting run."""
    cfg, tiny, count = (work / f"{name}.yaml", work / f"{name}-tiny.yaml",
                        work / f"{name}-count.yaml")
    for text, path in zip(scripts, (cfg, tiny, count)):
        export_config(root, text, path)
    start = min(run_driver(exe, tiny, traces[1], window)[0] for _ in range(repeat))
    runs = [run_driver(exe, cfg, traces[0], window) for _ in range(repeat)]
    _, counted = run_driver(exe, count, traces[0], window)
    counts = parse_counts(sorted((work / f"{name}-counts").glob("ch*.csv")))
    return PeerFigure(sum(counts.values()), counts, min(c for c, _ in runs) - start,
                      min(r.loop_cpu_s for _, r in runs), start, counted)


def measure(root: Path, n: int, repeat: int, work: Path) -> list[dict]:
    """Every standard and traffic: ours, the peer replaying our traffic (``replay``), the
    peer's own ``LoadStoreTrace`` frontend (``lst``)."""
    exe = build_driver(root)
    their = their_timing_params(root)
    rows = []
    for peer in PEERS:
        spec = dram_preset(peer.ours)
        simulate_requests(spec, [0, 64], [False, False], [0, 0])  # compile / load cache
        over, missing = timing_overrides(spec, peer, their[peer.standard])
        print(f"# {peer.ours} -> Ramulator {peer.standard} {peer.org_preset} "
              f"{peer.timing_preset}, {peer.controller}; overrides {over}; ours without a "
              f"counterpart: {missing or 'none'}; {peer.notes}", flush=True)
        for kind, addr, wr in dram_traffic(spec, n):
            tag = f"{peer.ours}-{kind}"
            trace, tiny = work / f"{tag}.trace", work / f"{tag}-tiny.trace"
            write_trace(trace, peer_address(spec, peer, addr), wr)
            write_trace(tiny, peer_address(spec, peer, addr[:STARTUP_REQUESTS]),
                        wr[:STARTUP_REQUESTS])
            fig = {}
            for mode, window in (("replay", WINDOW), ("lst", 0)):
                name = f"{tag}-{mode}"
                (work / f"{name}-counts").mkdir()
                tr = (trace, tiny) if mode == "lst" else (None, None)
                scripts = (config_script(spec, peer, over, None, tr[0]),
                           config_script(spec, peer, over, None, tr[1]),
                           config_script(spec, peer, over, work / f"{name}-counts", tr[0]))
                fig[mode] = peer_figure(root, exe, work, name, scripts, (trace, tiny),
                                        window, repeat)
            o_cpu, o_cmd, o_counts, o_cycles, o_rows = ours(spec, addr, wr, repeat)
            rows.append(dict(standard=peer.ours, traffic=kind, requests=n, ours_cmd=o_cmd,
                             ours_cpu=o_cpu, ours_counts=o_counts, **fig))
            print(f"# {tag}: ours {o_counts}; rows hit/miss/conflict "
                  f"{'/'.join(map(str, o_rows))}; {o_cycles:,} cycles", flush=True)
            for mode, f in fig.items():
                st = f.run.stats
                print(f"#   peer {mode}: {f.counts}; rows hit/miss/conflict {st['row_hits']}/"
                      f"{st['row_misses']}/{st['row_conflicts']}; reads+writes served "
                      f"{st['num_read_reqs_served'] + st['num_write_reqs_served']} (+"
                      f"{st['num_read_reqs_forwarded']} forwarded, "
                      f"+{st['num_write_reqs_coalesced']} coalesced) of {n}; "
                      f"{f.run.cycles:,} cycles; CPU-s {f.cpu_s:.3f} (start-up "
                      f"{f.startup_cpu_s:.3f} subtracted; loop {f.loop_cpu_s:.3f})", flush=True)
    return rows


def _rate(cmd: int, cpu: float) -> str:
    return f"{cmd / cpu / 1e6:.2f}" if cpu > 0 else "-"


def table(rows: list[dict]) -> str:
    """The side-by-side table (markdown)."""
    out = ["| standard | traffic | requests | commands ours / peer | CPU-s ours / peer "
           "(loop) | M commands/CPU-s ours / peer (loop) | peer LoadStoreTrace: commands, "
           "CPU-s, M commands/CPU-s (loop) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        p, q = r["replay"], r["lst"]
        out.append(
            f"| {r['standard']} | {r['traffic']} | {r['requests']:,} | {r['ours_cmd']:,} / "
            f"{p.commands:,} | {r['ours_cpu']:.3f} / {p.cpu_s:.3f} ({p.loop_cpu_s:.3f}) | "
            f"{_rate(r['ours_cmd'], r['ours_cpu'])} / {_rate(p.commands, p.cpu_s)} "
            f"({_rate(p.commands, p.loop_cpu_s)}) | {q.commands:,}, {q.cpu_s:.3f}, "
            f"{_rate(q.commands, q.cpu_s)} ({_rate(q.commands, q.loop_cpu_s)}) |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="peer_ramulator2.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--ramulator", required=True, type=Path,
                    help="the Ramulator 2 checkout, built (holds libramulator.so)")
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    if a.requests < STARTUP_REQUESTS or a.repeat < 1:
        print(f"error: --requests: expected >= {STARTUP_REQUESTS}, --repeat >= 1",
              file=sys.stderr)
        return 2
    root = a.ramulator.resolve()
    try:
        if not (root / "libramulator.so").is_file():
            raise PeerError(f"--ramulator {a.ramulator}: no libramulator.so there (build "
                            f"Ramulator 2 as this script's docstring says)")
        with tempfile.TemporaryDirectory(prefix="archsim-peer-") as tmp:
            rows = measure(root, a.requests, a.repeat, Path(tmp))
    except PeerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(rows))
    print(f"\n(Ramulator 2 {RAMULATOR_COMMIT}; peer CPU-s = process minus a "
          f"{STARTUP_REQUESTS}-request run; best of {a.repeat}; load average "
          f"{os.getloadavg()[0]:.1f}; affinity {sorted(os.sched_getaffinity(0))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
