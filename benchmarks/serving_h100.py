"""archsim serve's closed loop against the measured H100 deployments (docs/serving.md,
"Measured deployments").

    python3 benchmarks/serving_h100.py [REQUESTS_PER_CLIENT]
    python3 benchmarks/serving_h100.py --disaggregated [REQUESTS_PER_CLIENT]
    python3 benchmarks/serving_h100.py --model gpt-oss --precision fp4 [REQUESTS_PER_CLIENT]
    python3 benchmarks/serving_h100.py --separate-experts --model gpt-oss --precision fp4

Runs every row of ``shared/reference/serving_h100/deployments.csv`` that archsim can express
(:func:`archsim.validation.serving_h100.unsupported` says why the others are not) as the
same closed-loop benchmark on ``gpu/h100`` and prints, per row, the measured and predicted
mean TTFT and TPOT, then the median |error| per model and backend, TensorRT-LLM's TP 1 rows
(where its reserved slot was chosen) against its TP 2-8 rows, and the count of rows left
out by reason. Each row runs with its engine as deployed
(:func:`archsim.validation.serving_h100.engine_settings`). Deterministic; about 1-2 s per
row on one core.

``--model SUBSTR`` keeps the rows whose model id contains SUBSTR (case-insensitive),
``--precision P`` those of precision P (``bf16`` for the empty column), ``--backend B``
those of backend B: a subset of the rows, run the same way.

``--separate-experts`` prices the vLLM rows' MoE blocks as separate expert GEMMs instead
of vLLM's fused MoE call (:func:`archsim.validation.serving_h100.moe_routing`): the model
before the fused MoE reached serving, on the same commit.

``--runtime R`` runs the aggregated rows' GPUs under runtime R (``cuda_graph``: the engines'
CUDA-graph replay, kernels back to back; default: gpu/h100's own, ``ideal``, each kernel
launched alone; :func:`archsim.validation.serving_h100.engine_design`).

``--engine E`` runs every row with the serving engine E's host time (``archsim serve
--engine``; default ``auto``: each row's own backend and release,
:func:`archsim.validation.serving_h100.engine_for`; ``none``: no host time and the design's
own runtime, the model before the engines' host time came in).

``--fit-host`` fits each engine's host time (:data:`archsim.serve.engine.ENGINES`) on its
fit rows (:data:`archsim.validation.serving_h100.HOST_FIT_ROWS`): runs them without host
time under CUDA-graph replay and prints the least-absolute-deviation ``a + b x n`` (ms) of
measured - predicted mean TPOT against the running requests ``n``
(:func:`archsim.validation.serving_h100.fit_host`).

``--disaggregated`` runs instead the disaggregated rows of the served models, with the decode
slots (``decode_batch_size x decode_num_workers``) as the client count the rows do not give
(an assumption: docs/serving.md, "Disaggregated rows"); 20-45 s per row.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import archsim  # noqa: E402
from archsim.arch.gpu.host import RUNTIMES  # noqa: E402
from archsim.serve.engine import ENGINES  # noqa: E402
from archsim.validation.serving_h100 import (  # noqa: E402
    ZOO,
    Deployment,
    engine_for,
    fit_host,
    host_fit_engine,
    host_residual,
    load_deployments,
    median_errors,
    predict,
    render_markdown,
    unsupported,
)


def disaggregated(per_client: int) -> int:
    """The disaggregated rows of served models under the assumed load (module doc)."""
    acc = archsim.load("gpu/h100")
    preds = []
    print("line backend model prefill(workers,tp,pp,bs) decode(...) clients | TTFT meas pred "
          "err | TPOT meas pred err")
    for d in load_deployments():
        if d.mode != "disagg" or d.model_path not in ZOO:
            continue
        conc = d.decode[0] * d.decode[3]
        p = predict(d, acc, requests_per_client=per_client, concurrency=conc)
        preds.append(p)
        print(f"{d.line} {d.backend} {d.model} {d.prefill} {d.decode} {conc} | "
              f"{d.ttft_ms:.1f} {p.ttft_ms:.1f} {p.ttft_error:+.0%} | {d.tpot_ms:.2f} "
              f"{p.tpot_ms:.2f} {p.tpot_error:+.0%}", flush=True)
    print()
    print(render_markdown([("check, load assumed", preds)]))
    return 0


def _filters(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--model/--precision/--backend/--runtime/--engine VALUE`` pairs out of ``argv``; the
    rest."""
    got: dict[str, str] = {}
    rest: list[str] = []
    it = iter(argv)
    for a in it:
        if a in ("--model", "--precision", "--backend", "--runtime", "--engine"):
            v = next(it, None)
            if v is None:
                print(f"{a}: expected a value", file=sys.stderr)
                raise SystemExit(2)
            got[a[2:]] = v
        else:
            rest.append(a)
    return got, rest


def _keep(d: Deployment, f: dict[str, str]) -> bool:
    return (f.get("model", "").lower() in d.model_path.lower()
            and f.get("precision", d.precision or "bf16") == (d.precision or "bf16")
            and f.get("backend", d.backend) == d.backend)


def fit(per_client: int) -> int:
    """Each engine's host time on its fit rows (module doc)."""
    acc = archsim.load("gpu/h100")
    points: dict[str, list[tuple[int, float]]] = {}
    for d in load_deployments():
        e = host_fit_engine(d) if unsupported(d) is None else None
        if e is None:
            continue
        points.setdefault(e, []).append(host_residual(d, acc, per_client))
    for e, pts in points.items():
        a, b = fit_host(pts)
        print(f"{e}: {len(pts)} fit rows, host {a:.2f} ms + {b:.3f} ms x running requests "
              f"(shipped: {ENGINES[e].per_iteration_ms} + {ENGINES[e].per_seq_ms})")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--disaggregated":
        return disaggregated(int(argv[1]) if len(argv) > 1 else 10)
    if argv and argv[0] == "--fit-host":
        return fit(int(argv[1]) if len(argv) > 1 else 10)
    fused = "--separate-experts" not in argv
    argv = [a for a in argv if a != "--separate-experts"]
    filt, argv = _filters(argv)
    per_client = int(argv[0]) if argv else 10
    if filt.get("runtime", "ideal") not in RUNTIMES:
        print(f"--runtime: expected one of {', '.join(RUNTIMES)}", file=sys.stderr)
        return 2
    engine = filt.get("engine", "auto")
    if engine != "auto" and engine not in ENGINES:
        print(f"--engine: expected auto or one of {', '.join(ENGINES)}", file=sys.stderr)
        return 2
    rows = [d for d in load_deployments() if _keep(d, filt)]
    why = Counter(r for r in (unsupported(d) for d in rows) if r)
    ok = [d for d in rows if unsupported(d) is None]
    acc = archsim.load("gpu/h100")
    preds = []
    print("line backend release engine model tp isl osl conc | TTFT meas pred err | TPOT meas "
          "pred err")
    for d in ok:
        p = predict(d, acc, requests_per_client=per_client, fused_moe=fused,
                    runtime=filt.get("runtime"), engine=None if engine == "none" else engine)
        preds.append(p)
        print(f"{d.line} {d.backend} {d.version or '-'} {engine_for(d)} {d.model} {d.tp} "
              f"{d.isl} {d.osl} {d.concurrency} | "
              f"{d.ttft_ms:.1f} {p.ttft_ms:.1f} {p.ttft_error:+.0%} | {d.tpot_ms:.2f} "
              f"{p.tpot_ms:.2f} {p.tpot_error:+.0%}", flush=True)
    print(f"\n{len(ok)} of {len(rows)} rows expressible; {per_client} requests per client\n")
    print(render_markdown([("all", preds)]))
    # TensorRT-LLM's reserved slot was chosen on its TP 1 rows: those against the rest
    trt = [p for p in preds if p.deployment.backend == "trtllm"]
    for k, (n, at, ap, st, sp) in median_errors(
            trt, key=lambda d: "TP 1 (slot chosen)" if d.tp == 1 else "TP 2-8 (check)").items():
        print(f"trtllm {k}: {n} rows, TTFT {at:.0%} ({st:+.0%}), TPOT {ap:.0%} ({sp:+.0%})")
    print("\nleft out:")
    for reason, n in why.most_common():
        print(f"  {n:4d}  {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
