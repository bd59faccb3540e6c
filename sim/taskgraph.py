"""TaskGraph: the simulator's input, as compact numpy arrays (no object per task).

A task occupies one slot of one resource (a server for ``duration`` cycles, or a memory
for a transfer of ``mem_bytes``), after all its predecessors have finished. Families
build graphs with :class:`TaskGraphBuilder` (cheap per-task appends or vectorised
:meth:`TaskGraphBuilder.add_tasks`) and :meth:`TaskGraphBuilder.build` validates once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numba import njit

from archsim.sim.errors import TaskGraphError
from archsim.sim.jitcache import guard as _guard_cache

# task kinds
KIND_COMPUTE = 0  #: occupy a resource slot for ``duration`` cycles
KIND_READ = 1  #: memory read of ``mem_bytes`` at ``mem_addr``
KIND_WRITE = 2  #: memory write of ``mem_bytes`` at ``mem_addr``
# resource models
MODEL_SERVER = 0  #: capacity slots, tasks hold a slot for their duration
MODEL_BANDWIDTH = 1  #: memory: ceil(bytes / (bytes_per_cycle * efficiency)) cycles
MODEL_DRAM = 2  #: memory: command-level DRAM (config given to ``run``)

PRIORITY_LIMIT = 2**30  #: priorities must lie in [-2**30, 2**30 - 1)


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """Tasks, dependencies, resources and action counts as numpy arrays.

    Per task (length T): ``resource`` int32 (-1: no resource; the task just waits
    ``duration`` cycles, a zero-time join when 0), ``duration`` int64 cycles (compute
    tasks), ``kind`` int8 (KIND_*), ``mem_bytes`` int64, ``mem_addr`` int64 (byte
    address), ``op_index`` int32, ``priority`` int32 (lower runs first among events at
    the same cycle).

    Dependencies: predecessors of task t are ``dep_idx[dep_ptr[t]:dep_ptr[t+1]]``.

    Per resource (length R): ``resource_names``, ``resource_capacity`` int32 (tasks at
    once), ``resource_model`` int8 (MODEL_*), ``bytes_per_cycle`` / ``efficiency``
    float64 (bandwidth memories), ``dram_index`` int32 (index into the ``dram_configs``
    given to :func:`sim.run`, -1 otherwise).

    Actions: task t contributes ``act_count[k]`` of action ``act_action[k]`` on component
    ``act_component[k]`` for k in ``act_ptr[t]:act_ptr[t+1]``.

    ``clock_hz`` is the clock of every cycle count in the graph.
    """

    resource: np.ndarray
    duration: np.ndarray
    kind: np.ndarray
    mem_bytes: np.ndarray
    mem_addr: np.ndarray
    op_index: np.ndarray
    priority: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    resource_names: tuple[str, ...]
    resource_capacity: np.ndarray
    resource_model: np.ndarray
    bytes_per_cycle: np.ndarray
    efficiency: np.ndarray
    dram_index: np.ndarray
    act_ptr: np.ndarray
    act_component: np.ndarray
    act_action: np.ndarray
    act_count: np.ndarray
    component_names: tuple[str, ...]
    action_names: tuple[str, ...]
    op_names: tuple[str, ...]
    clock_hz: float = 1.0e9

    @property
    def num_tasks(self) -> int:
        """Number of tasks T."""
        return int(self.resource.shape[0])

    @property
    def num_resources(self) -> int:
        """Number of resources R."""
        return len(self.resource_names)

    @cached_property
    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(succ_ptr, succ_idx)``: the successors of task t, ascending, are
        ``succ_idx[succ_ptr[t]:succ_ptr[t+1]]`` (the transposed dependency CSR).

        Computed once per graph: :meth:`validate` (run by ``build``) needs it for the DAG
        check and :func:`sim.run` reuses it. ``succ_idx`` carries 4 zero entries past
        ``succ_ptr[T]`` (the engine's prefetches may read them). The dependency arrays
        must not be changed after the first use.
        """
        return successors_csr(self.dep_ptr, self.dep_idx)

    def validate(self) -> None:
        """Check ids, sizes, values and acyclicity; raise TaskGraphError listing problems."""
        errs: list[str] = []
        T, R = self.num_tasks, self.num_resources
        for name in ("duration", "kind", "mem_bytes", "mem_addr", "op_index", "priority"):
            if getattr(self, name).shape != (T,):
                errs.append(f"{name}: expected shape ({T},), got {getattr(self, name).shape}")
        for name in ("resource_capacity", "resource_model", "bytes_per_cycle", "efficiency",
                     "dram_index"):
            if getattr(self, name).shape != (R,):
                errs.append(f"{name}: expected shape ({R},), got {getattr(self, name).shape}")
        if self.dep_ptr.shape != (T + 1,) or self.act_ptr.shape != (T + 1,):
            errs.append("dep_ptr/act_ptr: expected shape (T+1,)")
        if errs:
            raise TaskGraphError("; ".join(errs))
        if T:
            bad = np.flatnonzero((self.resource < -1) | (self.resource >= R))
            if bad.size:
                errs.append(f"resource: task {bad[0]} uses id {self.resource[bad[0]]}, "
                            f"expected -1..{R - 1}")
            bad = np.flatnonzero(self.duration < 0)
            if bad.size:
                errs.append(f"duration: task {bad[0]} has {self.duration[bad[0]]} < 0")
            bad = np.flatnonzero((self.kind < 0) | (self.kind > 2))
            if bad.size:
                errs.append(f"kind: task {bad[0]} has {self.kind[bad[0]]}, expected 0, 1, 2")
            if np.any(self.mem_bytes < 0) or np.any(self.mem_addr < 0):
                errs.append("mem_bytes/mem_addr: expected >= 0")
            bad = np.flatnonzero((self.op_index < 0) | (self.op_index >= len(self.op_names)))
            if bad.size:
                errs.append(f"op_index: task {bad[0]} has {self.op_index[bad[0]]}, "
                            f"expected 0..{len(self.op_names) - 1}")
            if np.any(self.priority < -PRIORITY_LIMIT) or np.any(
                    self.priority >= PRIORITY_LIMIT - 1):
                errs.append("priority: expected in [-2**30, 2**30 - 1)")
            mem = self.kind > 0
            if np.any(mem):
                r = self.resource[mem]
                model = np.where(r >= 0, self.resource_model[np.maximum(r, 0)], -1)
                bad = np.flatnonzero(model < MODEL_BANDWIDTH)
                if bad.size:
                    t = np.flatnonzero(mem)[bad[0]]
                    errs.append(f"kind: memory task {t} is on resource {self.resource[t]}, "
                                "expected a bandwidth or dram memory")
        if np.any(self.resource_capacity < 1):
            errs.append("resource_capacity: expected >= 1")
        bw = self.resource_model == MODEL_BANDWIDTH
        if np.any(bw & ~((self.bytes_per_cycle > 0) & (self.efficiency > 0)
                         & (self.efficiency <= 1))):
            errs.append("bandwidth memory: expected bytes_per_cycle > 0, 0 < efficiency <= 1")
        if np.any((self.resource_model == MODEL_DRAM) & (self.dram_index < 0)):
            errs.append("dram_index: expected >= 0 for a dram resource")
        if self.dep_idx.size and (self.dep_idx.min() < 0 or self.dep_idx.max() >= T):
            errs.append(f"dep_idx: expected task ids 0..{T - 1}")
        if self.dep_ptr[0] != 0 or np.any(np.diff(self.dep_ptr) < 0) or \
                self.dep_ptr[-1] != self.dep_idx.size:
            errs.append("dep_ptr: expected non-decreasing from 0 to len(dep_idx)")
        if self.act_count.size:
            if (self.act_component.min() < 0 or self.act_component.max()
                    >= len(self.component_names) or self.act_action.min() < 0
                    or self.act_action.max() >= len(self.action_names)):
                errs.append("act_component/act_action: id out of range")
        if not self.clock_hz > 0:
            errs.append(f"clock_hz: expected > 0, got {self.clock_hz}")
        if not errs:
            cyc = _find_cycle_task(self.dep_ptr, *self.successors)
            if cyc >= 0:
                errs.append(f"dependencies: cycle through task {cyc} (graph must be a DAG)")
        if errs:
            raise TaskGraphError("; ".join(errs))


def successors_csr(dep_ptr: np.ndarray, dep_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Transpose the predecessor CSR into (succ_ptr, succ_idx), successors ascending;
    ``succ_idx`` ends with 4 zero padding entries.

    The arrays are allocated by numpy, which asks Linux for transparent huge pages on
    large arrays (``madvise``): the event engine reads ``succ_idx`` at random places,
    and on a 1M-task graph TLB misses on 4 KiB pages cost it ~15 % (measured)."""
    succ_ptr = np.zeros(dep_ptr.shape[0], np.int64)
    succ_idx = np.zeros(dep_idx.shape[0] + 4, np.int32)
    _fill_successors(dep_ptr, dep_idx, succ_ptr, succ_idx)
    return succ_ptr, succ_idx


@njit(cache=True)
def _fill_successors(dep_ptr, dep_idx, succ_ptr, succ_idx):
    """Fill zeroed ``succ_ptr`` (T + 1) and ``succ_idx`` (see :func:`successors_csr`)."""
    T = dep_ptr.shape[0] - 1
    for k in range(dep_idx.shape[0]):
        succ_ptr[dep_idx[k] + 1] += 1
    for t in range(T):
        succ_ptr[t + 1] += succ_ptr[t]
    fill = succ_ptr[:-1].copy()
    for t in range(T):
        for k in range(dep_ptr[t], dep_ptr[t + 1]):
            p = dep_idx[k]
            succ_idx[fill[p]] = t
            fill[p] += 1


@njit(cache=True)
def _find_cycle_task(dep_ptr, succ_ptr, succ_idx):
    """Kahn's algorithm; returns -1 for a DAG, else a task that lies on/after a cycle."""
    T = dep_ptr.shape[0] - 1
    indeg = np.empty(T, np.int64)
    stack = np.empty(T, np.int64)
    n = 0
    for t in range(T):
        indeg[t] = dep_ptr[t + 1] - dep_ptr[t]
        if indeg[t] == 0:
            stack[n] = t
            n += 1
    seen = 0
    while n > 0:
        n -= 1
        t = stack[n]
        seen += 1
        for k in range(succ_ptr[t], succ_ptr[t + 1]):
            s = succ_idx[k]
            indeg[s] -= 1
            if indeg[s] == 0:
                stack[n] = s
                n += 1
    if seen == T:
        return -1
    for t in range(T):
        if indeg[t] > 0:
            return t
    return -1


class TaskGraphBuilder:
    """Append resources, ops and tasks cheaply, then :meth:`build` a TaskGraph.

    Task ids are returned in creation order (0, 1, ...). Per-task calls append to
    Python lists; :meth:`add_tasks` appends whole numpy arrays. Both may be mixed.
    """

    def __init__(self, clock_hz: float = 1.0e9) -> None:
        self.clock_hz = float(clock_hz)
        self._res_names: list[str] = []
        self._res_cap: list[int] = []
        self._res_model: list[int] = []
        self._res_bpc: list[float] = []
        self._res_eff: list[float] = []
        self._res_dram: list[int] = []
        self._op_names: list[str] = []
        self._components: dict[str, int] = {}
        self._actions: dict[str, int] = {}
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._n_chunked = 0
        self._reset_lists()

    def _reset_lists(self) -> None:
        self._r: list[int] = []
        self._d: list[int] = []
        self._k: list[int] = []
        self._mb: list[int] = []
        self._ma: list[int] = []
        self._op: list[int] = []
        self._pr: list[int] = []
        self._ndep: list[int] = []
        self._deps: list[int] = []
        self._nact: list[int] = []
        self._ac: list[int] = []
        self._aa: list[int] = []
        self._an: list[float] = []

    # ------------------------------------------------------------------ resources
    def _add_resource(self, name: str, capacity: int, model: int, bpc: float, eff: float,
                      dram: int) -> int:
        if name in self._res_names:
            raise TaskGraphError(f"resource {name!r} defined twice")
        if capacity < 1:
            raise TaskGraphError(f"resource {name!r}: capacity {capacity}, expected >= 1")
        self._res_names.append(name)
        self._res_cap.append(int(capacity))
        self._res_model.append(model)
        self._res_bpc.append(float(bpc))
        self._res_eff.append(float(eff))
        self._res_dram.append(int(dram))
        return len(self._res_names) - 1

    def add_server(self, name: str, capacity: int = 1) -> int:
        """A resource running up to ``capacity`` tasks at once; returns its id."""
        return self._add_resource(name, capacity, MODEL_SERVER, 0.0, 1.0, -1)

    def add_bandwidth_memory(self, name: str, bytes_per_cycle: float,
                             efficiency: float = 1.0, capacity: int = 1) -> int:
        """A memory serving a transfer in ceil(bytes / (bytes_per_cycle*efficiency)) cycles."""
        if not (bytes_per_cycle > 0 and 0 < efficiency <= 1):
            raise TaskGraphError(f"memory {name!r}: expected bytes_per_cycle > 0 and "
                                 f"0 < efficiency <= 1, got {bytes_per_cycle}, {efficiency}")
        return self._add_resource(name, capacity, MODEL_BANDWIDTH, bytes_per_cycle,
                                  efficiency, -1)

    def add_dram(self, name: str, config_index: int = 0, capacity: int = 8) -> int:
        """A command-level DRAM (``dram_configs[config_index]`` at run time).

        ``capacity`` is the number of memory tasks whose bursts may be in flight at once.
        """
        if config_index < 0:
            raise TaskGraphError(f"dram {name!r}: config_index {config_index} < 0")
        return self._add_resource(name, capacity, MODEL_DRAM, 0.0, 1.0, config_index)

    def add_op(self, name: str) -> int:
        """Register an op (layer) name; returns its index for ``op=``."""
        self._op_names.append(name)
        return len(self._op_names) - 1

    def component(self, name: str) -> int:
        """Id of a component name (created on first use)."""
        return self._components.setdefault(name, len(self._components))

    def action(self, name: str) -> int:
        """Id of an action name (created on first use)."""
        return self._actions.setdefault(name, len(self._actions))

    # ---------------------------------------------------------------------- tasks
    @property
    def num_tasks(self) -> int:
        """Tasks added so far."""
        return self._n_chunked + len(self._r)

    def add_task(self, resource: int, duration: int = 0, *, kind: int = KIND_COMPUTE,
                 mem_bytes: int = 0, mem_addr: int = 0, op: int = 0, priority: int = 0,
                 deps: Iterable[int] = (),
                 actions: Iterable[tuple[int, int, float]] = ()) -> int:
        """Append one task; returns its id.

        Args:
            resource: resource id, or -1 for a join / pure delay.
            duration: cycles (compute tasks; ignored for memory tasks).
            kind: KIND_COMPUTE, KIND_READ or KIND_WRITE.
            mem_bytes: bytes moved (memory tasks). mem_addr: first byte address.
            op: op index. priority: lower first among same-cycle events.
            deps: predecessor task ids.
            actions: (component id, action id, count) triples.
        """
        self._r.append(resource)
        self._d.append(duration)
        self._k.append(kind)
        self._mb.append(mem_bytes)
        self._ma.append(mem_addr)
        self._op.append(op)
        self._pr.append(priority)
        n = len(self._deps)
        self._deps.extend(deps)
        self._ndep.append(len(self._deps) - n)
        if actions:
            m = 0
            for c, a, cnt in actions:
                self._ac.append(c)
                self._aa.append(a)
                self._an.append(cnt)
                m += 1
            self._nact.append(m)
        else:
            self._nact.append(0)
        return self._n_chunked + len(self._r) - 1

    def add_compute(self, resource: int, duration: int, deps: Iterable[int] = (),
                    **kw: Any) -> int:
        """Shorthand for a compute task."""
        return self.add_task(resource, duration, deps=deps, **kw)

    def add_read(self, resource: int, nbytes: int, addr: int = 0,
                 deps: Iterable[int] = (), **kw: Any) -> int:
        """Shorthand for a memory read of ``nbytes`` at ``addr``."""
        return self.add_task(resource, 0, kind=KIND_READ, mem_bytes=nbytes, mem_addr=addr,
                             deps=deps, **kw)

    def add_write(self, resource: int, nbytes: int, addr: int = 0,
                  deps: Iterable[int] = (), **kw: Any) -> int:
        """Shorthand for a memory write of ``nbytes`` at ``addr``."""
        return self.add_task(resource, 0, kind=KIND_WRITE, mem_bytes=nbytes, mem_addr=addr,
                             deps=deps, **kw)

    def add_join(self, deps: Iterable[int], **kw: Any) -> int:
        """A zero-time task finishing when all ``deps`` have finished."""
        return self.add_task(-1, 0, deps=deps, **kw)

    def _flush(self) -> None:
        if not self._r:
            return
        ndep = np.asarray(self._ndep, np.int64)
        nact = np.asarray(self._nact, np.int64)
        self._chunks.append((
            np.asarray(self._r, np.int32), np.asarray(self._d, np.int64),
            np.asarray(self._k, np.int8), np.asarray(self._mb, np.int64),
            np.asarray(self._ma, np.int64), np.asarray(self._op, np.int32),
            np.asarray(self._pr, np.int32), ndep, np.asarray(self._deps, np.int32),
            nact, np.asarray(self._ac, np.int32), np.asarray(self._aa, np.int32),
            np.asarray(self._an, np.float64),
        ))
        self._n_chunked += len(self._r)
        self._reset_lists()

    def add_tasks(self, resource: np.ndarray | Sequence[int], duration: np.ndarray | int = 0,
                  *, kind: np.ndarray | int = KIND_COMPUTE,
                  mem_bytes: np.ndarray | int = 0, mem_addr: np.ndarray | int = 0,
                  op: np.ndarray | int = 0, priority: np.ndarray | int = 0,
                  dep_ptr: np.ndarray | None = None, dep_idx: np.ndarray | None = None,
                  ) -> np.ndarray:
        """Append n tasks at once (vectorised); returns their ids.

        Scalars broadcast. ``dep_ptr`` (n+1, starting at 0) and ``dep_idx`` (absolute
        task ids) give the predecessors of each new task. No actions.
        """
        self._flush()
        r = np.asarray(resource, np.int32).ravel()
        n = r.size

        def col(v: np.ndarray | int, dt: type) -> np.ndarray:
            a: np.ndarray = np.asarray(v, dt)
            return np.broadcast_to(a, (n,)).copy() if a.ndim == 0 else a.ravel().copy()

        if dep_ptr is None:
            ndep = np.zeros(n, np.int64)
            deps = np.zeros(0, np.int32)
        else:
            dp = np.asarray(dep_ptr, np.int64)
            if dp.shape != (n + 1,) or dp[0] != 0:
                raise TaskGraphError(f"add_tasks: dep_ptr must have shape ({n + 1},) "
                                     "and start at 0")
            ndep = np.diff(dp)
            deps = np.asarray(dep_idx, np.int32).ravel()
            if deps.size != dp[-1]:
                raise TaskGraphError("add_tasks: len(dep_idx) must equal dep_ptr[-1]")
        self._chunks.append((
            r, col(duration, np.int64), col(kind, np.int8), col(mem_bytes, np.int64),
            col(mem_addr, np.int64), col(op, np.int32), col(priority, np.int32), ndep, deps,
            np.zeros(n, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
            np.zeros(0, np.float64),
        ))
        start = self._n_chunked
        self._n_chunked += n
        return np.arange(start, start + n, dtype=np.int64)

    def build(self) -> TaskGraph:
        """Concatenate, validate (ids, DAG, durations >= 0) and return the TaskGraph."""
        self._flush()
        if self._chunks:
            cols = [np.concatenate([c[i] for c in self._chunks]) for i in range(13)]
        else:
            cols = [np.zeros(0, d) for d in (np.int32, np.int64, np.int8, np.int64, np.int64,
                                             np.int32, np.int32, np.int64, np.int32,
                                             np.int64, np.int32, np.int32, np.float64)]
        dep_ptr = np.zeros(cols[7].size + 1, np.int64)
        np.cumsum(cols[7], out=dep_ptr[1:])
        act_ptr = np.zeros(cols[9].size + 1, np.int64)
        np.cumsum(cols[9], out=act_ptr[1:])
        tg = TaskGraph(
            resource=cols[0], duration=cols[1], kind=cols[2], mem_bytes=cols[3],
            mem_addr=cols[4], op_index=cols[5], priority=cols[6],
            dep_ptr=dep_ptr, dep_idx=cols[8],
            resource_names=tuple(self._res_names),
            resource_capacity=np.asarray(self._res_cap, np.int32),
            resource_model=np.asarray(self._res_model, np.int8),
            bytes_per_cycle=np.asarray(self._res_bpc, np.float64),
            efficiency=np.asarray(self._res_eff, np.float64),
            dram_index=np.asarray(self._res_dram, np.int32),
            act_ptr=act_ptr, act_component=cols[10], act_action=cols[11],
            act_count=cols[12],
            component_names=tuple(self._components), action_names=tuple(self._actions),
            op_names=tuple(self._op_names) if self._op_names else ("default",),
            clock_hz=self.clock_hz,
        )
        tg.validate()
        return tg


_guard_cache(_find_cycle_task)  # stale cross-file cache entries (sim/jitcache.py)
