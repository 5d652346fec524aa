"""The Ray backend: the local executor's slots, inside Ray actors on the nodes of a cluster.

``RayExecutor`` has the local :class:`~coevo_code.execution.executor.Executor`'s interface and
returns the same result dicts, cell for cell. Its workers are Ray actors, one per node that offers
the custom resource ``coevo_sandbox`` (start CPU nodes with ``ray start ...
--resources='{"coevo_sandbox": 1}'``), or, where no node offers it (a plain local ``ray.init()``),
one actor on the driver's node. Each actor builds a local ``Executor`` on its node, with that
node's own slot configuration (work dirs, uids, launcher, interpreter; nothing of the driver's
paths travels), and requests ``num_cpus`` equal to its slots plus one unit of ``coevo_sandbox``,
so that sandbox slots land on the CPU pool and never on GPU nodes.

The driver parses the jobs (a malformed one gives the local backend's ``{"id", "error"}``), leaves
out a job's repeated programs as the local backend does (each text runs once; its copies get its
verdicts, and the same cells run, ``stats()["cells"]``), cuts the rest into units (a few programs x
all tests, or one program x a chunk of tests; about ``unit_cells`` cells, fewer on small batches so
that every slot gets work), keeps a bounded number of units in flight (``units_in_flight``, default
two per slot: one running, one queued), writes each unit's outcomes into its job's matrices as it
finishes, and calls ``progress(cells)``. On a node, a unit holds one slot and runs its cells there
with the execution core's unit code (the same server requests, budgets and retry), so a slow
row never holds up the node's other slots.

Failures. A node counts as dead when Ray reports its actor dead (a node removed or drained: at
once; its raylet or the actor's process killed: about 2 s on the test cluster; a machine that
vanished: when Ray's health checks give up on it, tens of seconds with Ray's defaults), when its
actor answers no ping for ``node_timeout_s`` (default 30 s; pings go to busy nodes that have been
quiet for a third of that), or when it finishes no unit for longer than the largest time budget
of its units in flight (the local executor's budget for those cells, doubled for its own retry,
plus ``node_timeout_s``). Its actor is killed and its units in flight are retried on the other
nodes, each unit up to ``max_retries`` times (default 2), after which its cells become
``sandbox_error``. Every cell is written exactly once: a unit's result is
taken only from the attempt in flight, and a dead node's actor is killed, so late answers never
arrive. Where no node is left, the remaining cells are ``sandbox_error`` too; the next ``run``
starts actors on nodes that offer the resource again.

An executor holds every sandbox node's ``coevo_sandbox`` while it lives, so a second one is
refused (after a few seconds) unless both pass ``share`` (each then takes that part of every
node's resource and CPUs): the processes of a distributed run that all execute pass ``1/N``.

Ctrl-C during ``run`` cancels the queued units (``ray.cancel``; a unit already running on a slot
finishes there, bounded by its limits) and re-raises ``KeyboardInterrupt``.

The package, by concept: ``cluster`` (connecting, loopback), ``actor`` (the node side),
``nodes`` (placing actors, losing nodes), ``scheduler`` (units, the window in flight, retries),
``executor`` (:class:`RayExecutor`), ``doctor``; this module holds the backend's record.
"""

from __future__ import annotations

from ..registry import Backend, Processes
from .cluster import INSTALL_HINT, RESOURCE, RayBackendError, RayMissingError, init_ray
from .doctor import doctor_report
from .executor import RayExecutor

__all__ = ["RayExecutor", "RayBackendError", "RayMissingError", "RESOURCE", "INSTALL_HINT",
           "init_ray", "doctor_report", "share_nodes", "BACKEND"]


def share_nodes(options: dict, processes: Processes) -> dict:
    """The Ray options of one of ``processes``: every process of every agent opens one executor
    on the same pool, so each takes an equal part of every sandbox node (``share``) and of
    ``slots``, the slots per node for the whole run. A ``share`` given is kept."""
    if options.get("share") is None:
        drivers = processes.world_size * max(1, processes.agents)
        options["share"] = 1.0 / drivers
        if options.get("slots") is not None:
            options["slots"] = max(1, options["slots"] // drivers)
    return options


BACKEND = Backend(
    name="ray", factory=RayExecutor, takes_address=True, share=share_nodes, doctor=doctor_report,
    help="the same slots in Ray actors on the nodes of a Ray cluster (--exec_address)",
    options=frozenset({"slots", "launcher", "allow_unsafe", "use_uid", "preload", "heavy_preload",
                       "chunk_tests", "disable", "unit_cells", "units_in_flight", "max_retries",
                       "node_timeout_s", "start_timeout_s", "share", "ray_init"}))
