"""``archsim rerun RESULT.json [--json]``: evaluate again what produced a ``--json`` result
and say whether the input hash (config + overrides + workload + fidelity) and the numbers
match.

The result's ``extra.provenance.argv`` is a command line of ``run``, ``map`` or ``gemm``; it
is read by those commands' own flags (:mod:`archsim.cli.run`, :mod:`archsim.cli.gemm`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from archsim.cli import gemm, map_
from archsim.cli import run as run_command
from archsim.cli.common import Parser
from archsim.result import Result
from archsim.run_request import RunRequest, evaluate_request
from archsim.workloads.errors import Problem, WorkloadError

HELP = ("re-run what produced a 'run --json' result and check it reproduces; see "
        "'archsim rerun --help'")
DESCRIPTION = "Re-run the command that produced a 'archsim run/map/gemm --json' result and compare."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The result file and the output form."""
    ap.add_argument("result", help="a JSON file written by 'archsim run ... --json'")
    ap.add_argument("--json", action="store_true", help="print the new result as JSON")


def read_result(path: str) -> dict[str, Any]:
    """The JSON result at ``path`` with its provenance argv checked."""
    try:
        old = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkloadError(Problem(f"cannot read: {exc.strerror}", "", path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorkloadError(Problem(f"not a JSON result ({exc}); expected the output of "
                                    f"'archsim run ... --json'", "", path)) from None
    prov = old.get("extra", {}).get("provenance") if isinstance(old, dict) else None
    if not isinstance(prov, dict) or not isinstance(prov.get("argv"), list):
        raise WorkloadError(Problem("no extra.provenance.argv; expected the output of "
                                    "'archsim run/map/gemm ... --json' (archsim >= 0.1.0 with "
                                    "provenance)", "", path))
    return old


def request_of(argv: list[str]) -> RunRequest:
    """The :class:`RunRequest` a provenance command line stands for."""
    ap = Parser(prog="archsim")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, mod in (("run", run_command), ("map", map_), ("gemm", gemm)):
        mod.add_arguments(sub.add_parser(name))
    return run_command.request_from_args(ap.parse_args(argv))


def verdict(old: dict[str, Any], res: Result) -> tuple[bool, str]:
    """(reproduced?, the sentence saying so) for the old result and the new one."""
    same_hash = res.input_hash == old.get("input_hash")
    same = same_hash and all(res.to_dict().get(k) == old.get(k)
                             for k in ("latency_s", "energy_j", "area_mm2", "cycles"))
    return same, ("reproduced (same input hash, same latency, energy, area)" if same else
                  "input hash differs (config file or archsim changed)" if not same_hash else
                  "same inputs, different numbers (archsim version "
                  f"{old.get('archsim_version')} -> {res.archsim_version})")


#: Provenance fields that a machine may legitimately record differently (the config file's
#: absolute path) or that are compared on their own (the argv itself, the hash).
_UNCHECKED = {"config_file", "argv", "input_hash"}
#: Top-level fields of a result that restate its inputs.
_RESTATED = ("design", "workload", "phase", "fidelity", "archsim_version", "input_hash")


def provenance_mismatches(old: dict[str, Any], res: Result) -> list[str]:
    """Where the recorded inputs of ``old`` disagree with what its own argv evaluates to:
    an edited provenance field (model, overrides, batch, formats, version ...), an edited
    top-level restatement, or a top-level hash that is not the provenance's."""
    new = res.to_dict()
    new_prov = new["extra"]["provenance"]
    prov = old["extra"]["provenance"]
    out = [f"provenance.{k} is {prov.get(k)!r} but its argv evaluates {new_prov.get(k)!r}"
           for k in sorted((set(prov) | set(new_prov)) - _UNCHECKED)
           if prov.get(k) != new_prov.get(k)]
    out += [f"{k} is {old.get(k)!r} but the recorded inputs give {new.get(k)!r}"
            for k in _RESTATED if k != "input_hash" and old.get(k) != new.get(k)]
    if old.get("input_hash") != prov.get("input_hash"):
        out.append(f"input_hash {old.get('input_hash')!r} is not the provenance's "
                   f"{prov.get('input_hash')!r}")
    return out


def run(args: argparse.Namespace) -> int:
    """Re-evaluate; print the new result; exit 1 unless it reproduces, 2 when the file's
    recorded inputs contradict each other (an edited result is not verified)."""
    old = read_result(args.result)
    argv = [str(x) for x in old["extra"]["provenance"]["argv"]]
    if not argv or argv[0] not in ("run", "map", "gemm"):
        raise WorkloadError(Problem(f"extra.provenance.argv runs {argv[:1] or 'nothing'}; "
                                    "rerun verifies only results of 'archsim run', 'map' and "
                                    "'gemm'", "", args.result))
    req = request_of(argv)
    res = evaluate_request(req, on_compile=run_command.cold_start_note)
    bad = provenance_mismatches(old, res)
    if bad:
        raise WorkloadError(Problem(f"the recorded inputs do not match: {bad[0]}"
                                    + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                                    + "; the file was edited or written by another archsim",
                                    "", args.result))
    same, text = verdict(old, res)
    print(res.to_json() if args.json else res.table())
    print(f"rerun of {args.result}: {text}", file=sys.stderr)
    return 0 if same else 1
