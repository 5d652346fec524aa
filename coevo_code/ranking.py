"""Best-of-N selectors: pick one solution using generated tests or execution agreement.

All return an index into the solutions; ties go to the lowest index.
"""

from __future__ import annotations

import numpy as np

from .labels import cluster_by_outputs
from .rewards import _bool2d


def cure_select(generated) -> int:
    """CURE's best-of-N: the solution passing the most generated tests (the sum rule of
    Theorem 3.1)."""
    generated = _bool2d(generated, "generated")
    if generated.shape[0] == 0:
        raise ValueError("no solution to select from")
    return int(np.argmax(generated.sum(axis=1)))


def codet_select(generated, sqrt_solutions: bool = False) -> int:
    """CodeT dual execution agreement (Chen et al. 2022, arXiv:2207.10397): solutions that pass
    exactly the same set of generated tests form a consensus set S, scored

        f(S) = |tests passed by S| x |solutions in S|           (the paper)
        f(S) = |tests passed by S| x sqrt(|solutions in S|)     (``sqrt_solutions``: the authors' code)

    The best set's lowest-index solution is returned (ties between sets: the set whose first
    solution comes first)."""
    generated = _bool2d(generated, "generated")
    n = generated.shape[0]
    if n == 0:
        raise ValueError("no solution to select from")
    groups: dict[bytes, list[int]] = {}
    for i in range(n):
        groups.setdefault(generated[i].tobytes(), []).append(i)
    best, best_score = None, -1.0
    for members in groups.values():  # insertion order: by first member
        tests = int(generated[members[0]].sum())
        size = float(np.sqrt(len(members))) if sqrt_solutions else float(len(members))
        score = tests * size
        if score > best_score:
            best, best_score = members[0], score
    return int(best)


def mbr_exec_select(outputs, errored=None) -> int:
    """MBR-exec (Shi et al. 2022, arXiv:2204.11454) with the 0/1 loss on execution results: the
    solution whose outputs on the generated inputs agree exactly with the most other solutions.
    ``outputs[i][j]``: solution i's output on input j; ``errored[i][j]`` marks failed runs (their
    outputs compare as an error marker, so the solutions that errored on every input agree with
    each other). Clusters: :func:`coevo_code.labels.cluster_by_outputs`."""
    if len(outputs) == 0:
        raise ValueError("no solution to select from")
    cluster = cluster_by_outputs(outputs, errored)  # -1 (errored throughout) is a cluster here
    _, which, sizes = np.unique(cluster, return_inverse=True, return_counts=True)
    agree = sizes[which] - 1
    return int(np.argmax(agree))
