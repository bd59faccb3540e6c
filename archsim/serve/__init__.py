"""Request-level LLM serving simulation on any archsim design (docs/serving.md).

Each iteration of a replica's scheduler is priced through :func:`archsim.evaluate` on the
design's own model (memoised, :mod:`archsim.serve.cost`), so every hardware family serves
without special cases.
"""

from archsim.serve.cluster import LINKS, ROUTERS, KVLink, PoolSpec, ServeSetup, parse_link
from archsim.serve.cost import Batch, Cost, IterationCost
from archsim.serve.metrics import SLO, ServeResult, parse_slo
from archsim.serve.policy import Policy, register_policy
from archsim.serve.replica import ORDERS, POLICIES, PREEMPTIONS, SchedulerSpec
from archsim.serve.requests import LengthDist, Request, load_trace, synthesize
from archsim.serve.router import Router, register_router
from archsim.serve.run import find_capacity, serve, simulate
from archsim.workloads.kvtech import KVTechniques

__all__ = ["LINKS", "ROUTERS", "KVLink", "PoolSpec", "ServeSetup", "parse_link", "Batch",
           "Cost", "IterationCost", "KVTechniques", "SLO", "ServeResult", "parse_slo", "ORDERS", "POLICIES",
           "PREEMPTIONS", "SchedulerSpec", "Policy", "register_policy", "Router", "register_router", "LengthDist", "Request", "load_trace",
           "synthesize", "find_capacity", "serve", "simulate"]
