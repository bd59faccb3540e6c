"""What ``archsim run`` / ``map`` / ``gemm`` do between parsing and printing, plus
``archsim rerun`` and ``archsim compare``.

* The workload gets the design's native number format when no ``--a-format`` /
  ``--w-format`` is given (:func:`archsim.api.with_native_formats`), so ``archsim map
  eyeriss_like --model resnet50`` runs in int16 out of the box.
* A refused format names the formats each unit computes in natively.
* ``--sparsity N:M`` that changes nothing (the design runs the pattern dense, or no layer
  can be pruned with it) is a loud warning, not a silent dense result.
* Every result carries its provenance (``Result.extra["provenance"]``): the design and its
  ``--set`` overrides, model, phase, batch, seq, context, formats, tp, sparsity, fidelity,
  mapping mode, objective, archsim version, input hash and the command line that
  reproduces it; ``archsim rerun result.json`` runs that command line again and checks the
  input hash.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from archsim.cli_common import Parser, guarded, non_empty, positive_int
from archsim.workloads.errors import MappingError, Problem, WorkloadError

__all__ = ["build_workload", "evaluate_checked", "provenance", "rerun_main", "compare_main"]


def build_workload(args: argparse.Namespace, acc: Any) -> Any:
    """The workload of a parsed ``run``/``map``/``gemm`` command line, in the design's
    native format unless formats were given; records the formats used on ``args``."""
    import archsim

    if args.cmd == "gemm":
        wl = archsim.gemm_workload(args.m, args.n, args.k, args.batch,
                                   a_format=args.a_format or "fp16", w_format=args.w_format)
    else:
        # fused (FlashAttention-style) attention where the design runs it
        wl = archsim.workload(args.model, phase=args.phase, batch=args.batch, seq=args.seq,
                              context=args.context, tp=args.tp, a_format=args.a_format,
                              w_format=args.w_format,
                              attention=archsim.api.preferred_attention(acc),
                              kernels=getattr(args, "kernels", "fused"))
    args.native_format = None
    # eager_amp: autocast's policy set every op's format, so no design-native formats
    if getattr(args, "kernels", "fused") == "fused" and not args.a_format and not args.w_format:
        from archsim.api import with_native_formats

        wl, args.native_format = with_native_formats(acc, wl)
    if args.sparsity:
        wl = wl.with_sparsity(*args.sparsity)
    return wl


def evaluate_checked(args: argparse.Namespace, acc: Any, wl: Any) -> Any:
    """``archsim.evaluate`` for a parsed command line, with the format hint, the sparsity
    check and the provenance record."""
    import archsim

    mode = "search" if args.cmd == "map" else args.mapping
    def note() -> None:
        if numba_cache_cold():
            print("note: first cycle-level run: compiling the simulator kernels (up to ~1.5 "
                  "min on 2 cores with DRAM timing; cached for later runs)", file=sys.stderr)

    try:
        res = archsim.evaluate(acc, wl, fidelity=args.fidelity, objective=args.objective,
                               mapping=mode, constraints=args.constraints, refine=args.refine,
                               before_simulation=note)
    except MappingError as exc:
        nat = [f"{u.name}: {', '.join(u.native_formats())}" for u in acc.units
               if u.native_formats()]
        if nat and any("format" in p.message for p in exc.problems):
            hint = (f"{acc.name} computes natively in {'; '.join(nat)} (and narrower formats "
                    f"of the same kind): pass --a-format/--w-format among these, or neither")
            ps = list(exc.problems)
            if len(ps) == 1:
                p0 = ps[0]
                raise MappingError(Problem(f"{p0.message}; {hint}", p0.path, p0.file, p0.line),
                                   summary=exc.summary) from None
            raise MappingError([*ps, Problem(hint, "--a-format")],
                               summary=exc.summary) from None
        raise
    if args.sparsity and args.sparsity[0] < args.sparsity[1]:
        _check_sparsity_effect(args, acc, wl, res, mode)
    _check_substituted_formats(args, acc, res)
    res.extra["provenance"] = provenance(args, acc, wl, res, mode)
    return res


def numba_cache_cold() -> bool:
    """True when no compiled simulator kernel is cached yet (Numba writes ``*.nbi`` index
    files next to ``sim/`` or under ``NUMBA_CACHE_DIR``): the next cycle run compiles."""
    from archsim import sim

    base = Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else \
        Path(sim.__file__).resolve().parent / "__pycache__"
    try:
        return not any(base.rglob("engine._kernel-*.nbi"))
    except OSError:
        return True


def _check_substituted_formats(args: argparse.Namespace, acc: Any, res: Any) -> None:
    """Warn when a requested format runs on a unit whose native format has the same width
    but is another format (fp16 on tpu_like's bf16 multipliers is timed and charged as
    bf16): the substitution is the model's, the user should know it happened."""
    from archsim.workloads.formats import get_format

    used = {o.unit for o in res.ops}
    for flag, name in (("--a-format", args.a_format), ("--w-format", args.w_format)):
        if not name:
            continue
        f = get_format(name)
        for u in acc.units:
            nat = [get_format(n) for n in u.native_formats()]
            if u.name in used and nat and f.name not in {n.name for n in nat} and any(
                    n.bits == f.bits and n.is_float == f.is_float for n in nat):
                print(f"warning: {flag} {f.name}: {acc.name}'s {u.name} computes in "
                      f"{nat[0].name}; {f.name} operands are modelled as {nat[0].name} "
                      f"(same width)", file=sys.stderr)


def _check_sparsity_effect(args: argparse.Namespace, acc: Any, wl: Any, res: Any,
                           mode: str) -> None:
    """Warn (stderr) when ``--sparsity`` left the analytical result exactly unchanged."""
    import archsim

    n, m = args.sparsity
    dense = wl.with_sparsity(m, m)             # n == m removes sparsity
    a = archsim.evaluate(acc, dense, objective=args.objective, mapping=mode,
                         constraints=args.constraints)
    s = res if args.fidelity == "analytical" else archsim.evaluate(
        acc, wl, objective=args.objective, mapping=mode, constraints=args.constraints)
    if (a.latency_s, a.energy_j, a.dram_bytes) == (s.latency_s, s.energy_j, s.dram_bytes):
        pruned = sum(1 for op in wl.ops() if getattr(op, "w_sparsity", None) is not None
                     and op.w_sparsity.structured)
        why = (f"no layer's reduction dimension is a multiple of {m}" if not pruned else
               f"{acc.name} runs {n}:{m}-sparse weights dense (the pattern is not supported)")
        print(f"warning: --sparsity {n}:{m} changed nothing: {why}; the result is the dense "
              f"one", file=sys.stderr)
        res.extra["sparsity_effect"] = "none"


def provenance(args: argparse.Namespace, acc: Any, wl: Any, res: Any, mode: str) -> dict:
    """Everything that produced ``res``, and the argv that reproduces it."""
    a_fmt = args.a_format or getattr(args, "native_format", None)
    w_fmt = args.w_format or getattr(args, "native_format", None)
    argv = [args.cmd, str(args.config)]
    if args.cmd == "gemm":
        argv += ["--m", str(args.m), "--n", str(args.n), "--k", str(args.k)]
    else:
        argv += ["--model", args.model]
        for flag, v in (("--phase", args.phase), ("--seq", args.seq),
                        ("--context", args.context)):
            if v is not None:
                argv += [flag, str(v)]
        if args.tp != 1:
            argv += ["--tp", str(args.tp)]
        if getattr(args, "kernels", "fused") != "fused":
            argv += ["--kernels", args.kernels]
    argv += ["--batch", str(args.batch), "--fidelity", args.fidelity, "--objective",
             args.objective, "--mapping", mode]
    for flag, v in (("--a-format", args.a_format), ("--w-format", args.w_format),
                    ("--constraints", args.constraints)):
        if v:
            argv += [flag, str(v)]
    if args.refine:
        argv += ["--refine", str(args.refine)]
    if args.sparsity:
        argv += ["--sparsity", f"{args.sparsity[0]}:{args.sparsity[1]}"]
    for o in args.overrides:
        argv += ["--set", o]
    return {
        "design": acc.name, "config": str(args.config), "config_file": acc.source,
        "overrides": list(args.overrides), "model": getattr(args, "model", None),
        "gemm": [args.m, args.n, args.k] if args.cmd == "gemm" else None,
        "phase": wl.phase, "batch": args.batch, "seq": wl.seq, "context": wl.context,
        "a_format": a_fmt, "w_format": w_fmt,
        "formats_from": "flags" if (args.a_format or args.w_format) else
        ("design" if getattr(args, "native_format", None) else "model"),
        "tp": getattr(args, "tp", 1), "kernels": getattr(args, "kernels", "fused"),
        "sparsity": f"{args.sparsity[0]}:{args.sparsity[1]}" if args.sparsity else None,
        "fidelity": args.fidelity, "mapping": mode, "objective": args.objective,
        "refine": args.refine, "constraints": args.constraints,
        "archsim_version": res.archsim_version, "input_hash": res.input_hash,
        "argv": argv,
    }


# ---- archsim rerun ----------------------------------------------------------------------------
def rerun_main(argv: list[str]) -> int:
    """``archsim rerun RESULT.json [--json]``: evaluate again what produced a ``--json``
    result and say whether the input hash (config + overrides + workload + fidelity) and
    the numbers match."""
    ap = Parser(prog="archsim rerun", description="Re-run the command that produced a "
                "'archsim run/map/gemm --json' result and compare.")
    ap.add_argument("result", help="a JSON file written by 'archsim run ... --json'")
    ap.add_argument("--json", action="store_true", help="print the new result as JSON")
    args = ap.parse_args(argv)
    try:
        old = json.loads(Path(args.result).read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkloadError(Problem(f"cannot read: {exc.strerror}", "", args.result)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorkloadError(Problem(f"not a JSON result ({exc}); expected the output of "
                                    f"'archsim run ... --json'", "", args.result)) from None
    prov = old.get("extra", {}).get("provenance") if isinstance(old, dict) else None
    if not isinstance(prov, dict) or not isinstance(prov.get("argv"), list):
        raise WorkloadError(Problem("no extra.provenance.argv; expected the output of "
                                    "'archsim run/map/gemm ... --json' (archsim >= 0.1.0 with "
                                    "provenance)", "", args.result))
    from archsim.cli import build_parser

    ns = build_parser().parse_args([str(x) for x in prov["argv"]])
    import archsim

    acc = archsim.load(ns.config, ns.overrides)
    wl = build_workload(ns, acc)
    res = evaluate_checked(ns, acc, wl)
    same_hash = res.input_hash == old.get("input_hash")
    same = same_hash and all(res.to_dict().get(k) == old.get(k)
                             for k in ("latency_s", "energy_j", "area_mm2", "cycles"))
    if args.json:
        print(res.to_json())
    else:
        print(res.table())
    print(f"rerun of {args.result}: " + (
        "reproduced (same input hash, same latency, energy, area)" if same else
        "input hash differs (config file or archsim changed)" if not same_hash else
        "same inputs, different numbers (archsim version "
        f"{old.get('archsim_version')} -> {res.archsim_version})"), file=sys.stderr)
    return 0 if same else 1


# ---- archsim compare --------------------------------------------------------------------------
_COMPARE_ROWS = (("latency", "latency_s", "s"), ("energy", "energy_j", "J"),
                 ("power", "power_w", "W"), ("area", "area_mm2", "mm2"),
                 ("utilization", "utilization", ""), ("TFLOP/s", "throughput_flops", "T"),
                 ("tokens/s", "tokens_per_s", ""), ("samples/s", "samples_per_s", ""),
                 ("DRAM bytes", "dram_bytes", "B"))


def compare_main(argv: list[str]) -> int:
    """``archsim compare DESIGN... --model M [--phase ... --batch ...] [--csv]``: one
    evaluation per design (each in its native format unless formats are given), side by
    side."""
    ap = Parser(prog="archsim compare", description="Evaluate one model on several designs "
                "and print them side by side.")
    ap.add_argument("designs", nargs="+", help="config YAMLs or reference-design names")
    ap.add_argument("--model", required=True, help="zoo model name or HF config.json")
    ap.add_argument("--phase", choices=("prefill", "decode", "train", "inference"))
    ap.add_argument("--batch", type=positive_int, default=1)
    ap.add_argument("--seq", type=positive_int)
    ap.add_argument("--context", type=positive_int)
    ap.add_argument("--a-format", type=non_empty)
    ap.add_argument("--w-format", type=non_empty)
    ap.add_argument("--fidelity", choices=("analytical", "cycle"), default="analytical")
    ap.add_argument("--csv", action="store_true", help="CSV instead of a text table")
    args = ap.parse_args(argv)
    import archsim

    cols: list[tuple[str, Any]] = []
    for d in args.designs:
        ns = argparse.Namespace(cmd="run", config=d, model=args.model, phase=args.phase,
                                batch=args.batch, seq=args.seq, context=args.context, tp=1,
                                a_format=args.a_format, w_format=args.w_format, sparsity=None,
                                overrides=[], fidelity=args.fidelity, objective="latency",
                                mapping="default", constraints=None, refine=0)
        acc = archsim.load(d)
        res = evaluate_checked(ns, acc, build_workload(ns, acc))
        cols.append((d, res))
    rows = [("format", [r.extra["provenance"]["a_format"] or "model" for _, r in cols])]
    for label, key, _ in _COMPARE_ROWS:
        vals = [getattr(r, key) for _, r in cols]
        if all(v is None for v in vals):
            continue
        rows.append((label, vals))
    if args.csv:
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["metric", *[d for d, _ in cols]])
        for label, vals in rows:
            w.writerow([label, *["" if v is None else v for v in vals]])
        return 0
    width = max(12, *(len(d) for d, _ in cols))
    print(f"{args.model} ({cols[0][1].phase}, batch {args.batch})")
    print(f"{'':<12} " + " ".join(f"{d:>{width}}" for d, _ in cols))
    for label, vals in rows:
        print(f"{label:<12} " + " ".join(f"{_fmt(v):>{width}}" for v in vals))
    return 0


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:.4g}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(guarded(lambda: rerun_main(sys.argv[1:])))

