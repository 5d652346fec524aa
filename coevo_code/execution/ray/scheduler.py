"""The driver's scheduling: a batch cut into units for the nodes, a bounded window of units in
flight, each unit's cells written once, and the watchdog that counts a node lost and retries
its units elsewhere."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from dataclasses import dataclass

from ..core import UNIT_MARGIN_S, JobState, cell_budget_s, distinct_programs
from .nodes import Node, NodePool

log = logging.getLogger(__name__)

# test chunks at least this large travel once through the object store, not with every unit
SHARE_TESTS_BYTES = 64 * 1024


@dataclass
class RayUnit:
    """Programs ``programs`` (indices into job ``job``'s, distinct texts) x tests ``a:b``."""
    job: int
    programs: tuple
    a: int
    b: int
    budget_s: float
    attempts: int = 0

    @property
    def cells(self) -> int:
        return len(self.programs) * (self.b - self.a)


def plan_units(states: list[JobState | None], copies: list[dict[int, int]], slots: int,
               unit_cells: int, chunk_tests: int, node_timeout_s: float) -> list[RayUnit]:
    """Units of about ``unit_cells`` cells over the programs that run (copies left out, as the
    core plans them): a few programs x all tests when tests are few, else one program x a chunk
    of tests; on small batches smaller ones, so that every one of ``slots`` gets some. A unit's
    budget is the core's for those cells in the node's units of ``chunk_tests`` tests, twice
    (for the node's own retry), plus ``node_timeout_s``."""
    live = slots or 1
    total = sum((st.job.shape[0] - len(c)) * st.job.shape[1]
                for st, c in zip(states, copies) if st is not None)
    size = max(1, min(unit_cells, -(-total // (4 * live))))
    chunk = chunk_tests
    units = []
    for i, st in enumerate(states):
        if st is None:
            continue
        job = st.job
        rows = distinct_programs(job, copies[i])
        n, t = len(rows), job.shape[1]
        if n == 0 or t == 0:
            continue
        cell_s = cell_budget_s(job)
        if t >= size:
            k = -(-t // size)
            step = -(-t // k)
            spans = [(p, p + 1, a, min(t, a + step)) for p in range(n)
                     for a in range(0, t, step)]
        else:
            per = max(1, size // t)
            k = -(-n // per)
            per = -(-n // k)
            spans = [(p, min(n, p + per), 0, t) for p in range(0, n, per)]
        for p0, p1, a, b in spans:
            local_units = (p1 - p0) * -(-(b - a) // chunk)
            budget = 2 * ((p1 - p0) * (b - a) * cell_s + UNIT_MARGIN_S * local_units)
            units.append(RayUnit(i, tuple(rows[p0:p1]), a, b, budget + node_timeout_s))
    return units


def payload(ray, st: JobState, u: RayUnit, shared: dict) -> tuple:
    """The unit's arguments: its sub-job, and its tests by reference when they are large
    (put in the object store once, for every program's unit)."""
    job = st.job
    key = (u.job, u.a, u.b)
    ref = shared.get(key)
    if ref is None:
        tests = job.tests[u.a:u.b]
        if job.kind == "stdio":
            size = sum(len(i) + len(o) for i, o in tests)
        else:
            size = sum(len(c) for c in tests)
        ref = shared[key] = ray.put(tests) if size >= SHARE_TESTS_BYTES else False
    programs = [job.programs[p] for p in u.programs]
    if ref is False:
        return (dataclasses.replace(job, programs=programs, tests=job.tests[u.a:u.b]),)
    return dataclasses.replace(job, programs=programs, tests=[]), ref


def drive(pool: NodePool, states: list, units: list[RayUnit], progress, *, max_retries: int,
          node_timeout_s: float) -> None:
    """Run ``units`` on ``pool``'s live nodes, writing each unit's cells into ``states`` (and
    calling ``progress(cells)``) once; a unit lost with its node is retried elsewhere up to
    ``max_retries`` times, then its cells (and those no live node is left for) become
    ``sandbox_error``. Ctrl-C cancels the units in flight and re-raises."""
    ray = pool.ray
    from ray.exceptions import RayActorError

    pending = deque(units)
    inflight: dict = {}   # ref -> (node, unit)
    pings: dict = {}      # ref -> node
    shared: dict = {}     # (job, a, b) -> the tests' object ref, or False: sent inline
    now = time.monotonic()
    for n in pool.nodes:
        n.inflight.clear()
        n.heard = n.progressed = now
        n.ping_ref = None

    def write(u: RayUnit, outcomes, outputs, compiled=None) -> None:
        st = states[u.job]
        for r, p in enumerate(u.programs):
            st.outcomes[p][u.a:u.b] = outcomes[r]
            if st.outputs is not None and outputs is not None:
                st.outputs[p][u.a:u.b] = outputs[r]
            if compiled and r in compiled:  # C++/Java: the compiler's text of this row
                st.compile_output[p] = compiled[r]
        st.t1 = max(st.t1, time.monotonic())
        if progress is not None:
            progress(u.cells)

    def give_up(u: RayUnit) -> None:
        write(u, [["sandbox_error"] * (u.b - u.a)] * len(u.programs), None)

    def retry(u: RayUnit) -> None:
        u.attempts += 1
        if u.attempts > max_retries:
            give_up(u)
        else:
            pending.appendleft(u)

    def lose(node: Node, why: str) -> None:
        for ref in pool.lose(node, why):
            _, u = inflight.pop(ref)
            retry(u)
        if node.ping_ref is not None:
            pings.pop(node.ping_ref, None)
            node.ping_ref = None

    def submit() -> None:
        live = pool.live()
        while pending and live:
            node = min(live, key=lambda n: len(n.inflight) / n.cap)
            if len(node.inflight) >= node.cap:
                return
            u = pending.popleft()
            st = states[u.job]
            t = time.monotonic()
            if not st.t0:
                st.t0 = t
            if not node.inflight:
                node.progressed = max(node.progressed, t)
            ref = node.actor.run_unit.remote(*payload(ray, st, u, shared))
            inflight[ref] = (node, u)
            node.inflight[ref] = u

    try:
        while pending or inflight:
            submit()
            if not inflight:  # no live node is left for what remains
                log.error("ray backend: no live sandbox node; %d unit(s) become "
                          "sandbox_error", len(pending))
                while pending:
                    give_up(pending.popleft())
                break
            refs = list(inflight) + list(pings)
            ready, _ = ray.wait(refs, num_returns=1, timeout=1.0)
            if ready and len(refs) > 1:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            now = time.monotonic()
            for ref in ready:
                if ref in pings:
                    node = pings.pop(ref)
                    node.ping_ref = None
                    try:
                        ray.get(ref)
                        node.heard = now
                    except RayActorError as e:
                        lose(node, f"{type(e).__name__}")
                    continue
                if ref not in inflight:  # its node was lost meanwhile
                    continue
                node, u = inflight.pop(ref)
                node.inflight.pop(ref, None)
                try:
                    outcomes, outputs, compiled = ray.get(ref)
                    if len(outcomes) != len(u.programs) or any(
                            len(r) != u.b - u.a for r in outcomes):
                        raise ValueError("a result of the wrong shape")
                except RayActorError as e:  # the node's actor is gone: retry elsewhere
                    retry(u)
                    lose(node, type(e).__name__)
                    continue
                except Exception as e:  # noqa: BLE001 - the unit failed, the node answers
                    node.heard = node.progressed = now
                    log.error("ray backend: a unit failed on node %s: %s", node.ip,
                              str(e).strip().splitlines()[-1] if str(e).strip() else e)
                    retry(u)
                    continue
                node.heard = node.progressed = now
                write(u, outcomes, outputs, compiled)
            # watchdog: pings for nodes that went quiet, and deadlines
            for node in [n for n in pool.nodes if n.alive and n.inflight]:
                quiet = now - node.heard
                longest = max(u.budget_s for u in node.inflight.values())
                if quiet > node_timeout_s:
                    lose(node, f"no answer for {quiet:.0f} s")
                elif now - node.progressed > longest:
                    lose(node, f"no unit finished within {longest:.0f} s")
                elif quiet > node_timeout_s / 3 and node.ping_ref is None:
                    node.ping_ref = node.actor.ping.remote()
                    node.ping_sent = now
                    pings[node.ping_ref] = node
        if any(not n.alive for n in pool.nodes):
            pool.layout()
    except KeyboardInterrupt:
        for ref in list(inflight):
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001
                pass
        raise
