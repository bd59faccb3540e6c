"""Provisioning search (``archsim provision``): how many prefill and decode machines of which
designs serve a request stream at the best goodput under a cost and a power budget — the
question the phase-splitting papers (DistServe, Splitwise) ask.

    from archsim.serve.provision import provision
    found = provision("llama3-8b", prefill_designs=("h100", "a100"), decode_designs=("a100",),
                      prices={"h100": 4.0, "a100": 2.0}, max_cost_per_hour=16, rate=4,
                      duration=30, slo="ttft=2s,tpot=100ms")
    print(found.table()); print(found.frontier_text())

The space is small and enumerated whole: every (prefill design, prefill replicas, prefill tp)
x (decode design, decode replicas, decode tp). Each point is one disaggregated serving
simulation (:func:`archsim.serve.session.run_serving` with ``decode_design``: the prefill pool
on one design, the decode pool on another, the KV cache moved between them). A point over
the cost budget is excluded before it is simulated (its cost is known: devices x price per
device-hour); a point over the power budget after (its power is the simulated average board
power of every device at this load: busy, waiting and idle, as ``archsim serve`` reports it).
The best point is the highest goodput (requests per second that meet the SLO), ties to the
lower cost; the frontier is the points no other beats on both goodput and cost. At a rate
every deployment sustains, goodput is the arrival rate for all of them; ``find_capacity``
makes it each deployment's capacity instead (the highest rate whose SLO attainment meets the
target, DistServe's goodput; a rate search per deployment, so slower).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from archsim.serve.metrics import ServeResult
from archsim.serve.session import ServingRun, run_serving
from archsim.workloads.errors import ConfigError, Problem, inert

__all__ = ["Pool", "Provision", "ProvisionSearch", "provision"]


@dataclass(frozen=True)
class Pool:
    """One pool of a deployment: ``replicas`` replicas of ``tp`` devices of ``design``."""

    design: str
    replicas: int
    tp: int = 1

    @property
    def devices(self) -> int:
        return self.replicas * self.tp

    def label(self) -> str:
        return f"{self.replicas}x {self.design}" + (f" tp{self.tp}" if self.tp > 1 else "")


@dataclass(frozen=True)
class Provision:
    """One deployment tried: its pools, cost, and (when simulated) its serving metrics.

    Attributes:
        cost_per_hour: devices x their price per device-hour (USD/h).
        excluded: why it is out of the budget ("" when within it).
        result: the serving metrics (None when excluded before simulating).
        capacity_rps: with ``find_capacity``: the highest rate whose SLO attainment meets
            the target (DistServe's goodput), else None.
    """

    prefill: Pool
    decode: Pool
    cost_per_hour: float
    excluded: str = ""
    result: ServeResult | None = None
    capacity_rps: float | None = None

    @property
    def devices(self) -> int:
        return self.prefill.devices + self.decode.devices

    @property
    def goodput_rps(self) -> float:
        """Requests per second that meet the SLO: the capacity found (``find_capacity``),
        else those of the simulated stream (at most its arrival rate)."""
        if self.capacity_rps is not None:
            return self.capacity_rps
        return self.result.goodput_rps if self.result is not None else 0.0

    @property
    def power_w(self) -> float:
        return self.result.avg_power_w if self.result is not None else 0.0

    def label(self) -> str:
        return f"prefill {self.prefill.label()} + decode {self.decode.label()}"


@dataclass(frozen=True)
class ProvisionSearch:
    """Every deployment tried: ``ranked`` (within budget, best goodput first, ties to the
    lower cost) and ``excluded`` (over a budget, with the reason)."""

    model: str
    ranked: tuple[Provision, ...]
    excluded: tuple[Provision, ...]
    max_cost_per_hour: float | None
    max_power_w: float | None
    search_s: float
    tried: int = field(default=0)

    @property
    def best(self) -> Provision | None:
        return self.ranked[0] if self.ranked else None

    @property
    def frontier(self) -> tuple[Provision, ...]:
        """The within-budget deployments no other beats on both goodput (higher) and cost
        (lower), cheapest first."""
        out: list[Provision] = []
        for p in sorted(self.ranked, key=lambda p: (p.cost_per_hour, -p.goodput_rps)):
            if not out or p.goodput_rps > out[-1].goodput_rps:
                out.append(p)
        return tuple(out)

    def table(self, top: int = 10) -> str:
        """The best ``top`` deployments, then how many were excluded and why."""
        lines = [f"{'deployment':<48} {'devices':>7} {'$/h':>8} {'power W':>9} "
                 f"{'goodput r/s':>11} {'SLO met':>7}"]
        for p in self.ranked[:top]:
            r = p.result
            lines.append(f"{p.label():<48} {p.devices:>7} {p.cost_per_hour:>8.4g} "
                         f"{p.power_w:>9.5g} {p.goodput_rps:>11.4g} "
                         f"{(r.slo_attainment if r else 0):>7.1%}")
        if self.excluded:
            lines.append(f"excluded: {len(self.excluded)} over budget (e.g. "
                         f"{self.excluded[0].label()}: {self.excluded[0].excluded})")
        return "\n".join(inert(ln) for ln in lines)

    def frontier_text(self) -> str:
        """The cost-goodput frontier, one deployment a line."""
        return "\n".join(inert(f"  ${p.cost_per_hour:.4g}/h  {p.goodput_rps:.4g} req/s  "
                               f"{p.label()}") for p in self.frontier)

    def summary(self) -> str:
        budget = []
        if self.max_cost_per_hour is not None:
            budget.append(f"cost <= ${self.max_cost_per_hour:g}/h")
        if self.max_power_w is not None:
            budget.append(f"power <= {self.max_power_w:g} W")
        within = f" under {' and '.join(budget)}" if budget else ""
        return inert(f"{self.model}: {self.tried} deployments tried{within}, "
                     f"{len(self.ranked)} within budget, {len(self.excluded)} excluded "
                     f"({self.search_s:.1f} s)")


def _counts(values: Sequence[int], flag: str) -> tuple[int, ...]:
    vals = tuple(dict.fromkeys(values))
    if not vals or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in vals):
        raise ConfigError(Problem(f"expected integers >= 1, got {list(values)!r}", flag))
    return vals


def provision(model: str, prefill_designs: Sequence[str], decode_designs: Sequence[str], *,
              prices: Mapping[str, float], replicas: Sequence[int] = (1, 2),
              decode_replicas: Sequence[int] = (1, 2), tp: Sequence[int] = (1,),
              decode_tp: Sequence[int] | None = None,
              max_cost_per_hour: float | None = None, max_power_w: float | None = None,
              slo: str = "ttft=2s,tpot=100ms",
              serve: Callable[..., ServingRun] = run_serving,
              note: Callable[[str], None] | None = None, **requests: Any) -> ProvisionSearch:
    """Search (prefill design x replicas x tp) x (decode design x replicas x tp) for the best
    goodput within a cost and a power budget (module doc).

    Args:
        model: a zoo model or a Hugging Face ``config.json``.
        prefill_designs, decode_designs: the designs each pool may run on.
        prices: USD per device-hour of every design named (``--price DESIGN=USD``).
        replicas, decode_replicas, tp, decode_tp: the counts searched (``decode_tp``:
            default ``tp``).
        max_cost_per_hour, max_power_w: the budgets (None: no limit).
        slo: the SLO whose attainment sets the goodput (``ttft=2s,tpot=100ms``).
        serve: the serving simulation (default :func:`run_serving`; its signature).
        note: called with one line per deployment simulated.
        requests: the request stream, as ``run_serving`` takes it (``rate``, ``duration``,
            ``prompt``, ``output``, ``trace``, ``seed`` ...) and the other serving options
            (``a_format``, ``weight_sparsity``, ``kv_link`` ...).
    Raises:
        ConfigError: no design, a design without a price, a bad count or budget.
    """
    t0 = time.perf_counter()
    if not prefill_designs or not decode_designs:
        raise ConfigError(Problem("expected at least one design for each pool",
                                  "--prefill-designs" if not prefill_designs
                                  else "--decode-designs"))
    missing = [d for d in dict.fromkeys([*prefill_designs, *decode_designs]) if d not in prices]
    if missing:
        raise ConfigError(Problem(f"no price for {', '.join(missing)}; give each design's "
                                  f"USD per device-hour as DESIGN=USD", "--price"))
    for name, usd in prices.items():
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not usd >= 0:
            raise ConfigError(Problem(f"expected a price >= 0 for {name}, got {usd!r}",
                                      "--price"))
    for flag, v in (("--max-cost", max_cost_per_hour), ("--max-power", max_power_w)):
        if v is not None and not v > 0:
            raise ConfigError(Problem(f"expected a budget > 0, got {v!r}", flag))
    pre = [Pool(d, r, t) for d in prefill_designs for r in _counts(replicas, "--replicas")
           for t in _counts(tp, "--tp")]
    dec = [Pool(d, r, t) for d in decode_designs
           for r in _counts(decode_replicas, "--decode-replicas")
           for t in _counts(tp if decode_tp is None else decode_tp, "--decode-tp")]
    ranked: list[Provision] = []
    excluded: list[Provision] = []
    for p, d in itertools.product(pre, dec):
        cost = p.devices * prices[p.design] + d.devices * prices[d.design]
        point = Provision(p, d, cost)
        if max_cost_per_hour is not None and cost > max_cost_per_hour:
            excluded.append(Provision(p, d, cost, f"cost ${cost:.4g}/h > "
                                                  f"${max_cost_per_hour:g}/h"))
            continue
        run = serve(p.design, model, replicas=p.replicas, tp=p.tp,
                    decode_design=d.design, decode_replicas=d.replicas, decode_tp=d.tp,
                    slo=slo, **requests)
        res = run.result
        cap = (run.capacity_rps or 0.0) if requests.get("find_capacity") else None
        point = Provision(p, d, cost, result=res, capacity_rps=cap)
        if note is not None:
            note(f"{point.label()}: goodput {point.goodput_rps:.4g} req/s, "
                 f"{point.power_w:.5g} W, ${cost:.4g}/h")
        if max_power_w is not None and point.power_w > max_power_w:
            excluded.append(Provision(p, d, cost, f"power {point.power_w:.5g} W > "
                                                  f"{max_power_w:g} W", res, cap))
            continue
        ranked.append(point)
    ranked.sort(key=lambda q: (-q.goodput_rps, q.cost_per_hour, q.devices))
    return ProvisionSearch(model, tuple(ranked), tuple(excluded), max_cost_per_hour,
                           max_power_w, time.perf_counter() - t0, len(pre) * len(dec))
