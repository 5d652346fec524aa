"""What a run trains on besides the real rewards: the control runs (``reward_control``: the same
rewards shuffled or negated, the honesty checks of ``benchmarks/learning.py``) and one role
trained alone (``train_roles``). Pure functions on a batch's rewards and roles; the logged
metrics stay the real ones."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..roles import CODE, TEST


CONTROLS = ("none", "shuffle", "flip")


def control_rewards(rewards: Sequence, roles: Sequence[str], control: str,
                    rng: np.random.Generator) -> list:
    """The rewards a control run trains on (the issue's honesty checks; the logged metrics stay
    the real ones): ``shuffle`` permutes each role's rewards within the batch (the same values,
    tied to the wrong completions), ``flip`` negates them; rows without a reward (None) keep
    none. ``none`` returns them unchanged."""
    out = list(rewards)
    if control == "none":
        return out
    if control == "flip":
        return [None if r is None else -r for r in out]
    if control != "shuffle":
        raise ValueError(f"reward control must be one of {', '.join(CONTROLS)}, got {control!r}")
    for role in (CODE, TEST):
        idx = [i for i, (r, ro) in enumerate(zip(out, roles)) if ro == role and r is not None]
        vals = [out[i] for i in idx]
        for i, j in zip(idx, rng.permutation(len(idx))):
            out[i] = vals[j]
    return out


ROLES_TRAINED = ("both", "code", "test")


def trained_roles(rewards: Sequence, roles: Sequence[str], which: str) -> list:
    """The rewards of the roles a run trains (``train_roles``): ``both`` (CURE: coder and tester
    together) keeps every reward; ``code`` (a coder-only run) leaves the test rows without a
    reward, ``test`` (tester-only) the code rows, so TRL gives those rows zero advantage and the
    trainer leaves them out of the loss. The logged metrics stay those of every row."""
    if which not in ROLES_TRAINED:
        raise ValueError(f"train_roles must be one of {', '.join(ROLES_TRAINED)}, got {which!r}")
    if which == "both":
        return list(rewards)
    keep = CODE if which == "code" else TEST
    return [r if ro == keep else None for r, ro in zip(rewards, roles)]
