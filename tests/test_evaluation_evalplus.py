"""`coevo eval --samples` against evalplus's own evaluator on the same local files: canonical
solutions pass; deliberately broken ones get the same per-task verdicts (base and base+plus).
Seeded samples of the shared HumanEval+ and MBPP+ files; the full files are checked by
benchmarks/evalplus_agreement.py."""

from __future__ import annotations

import pytest

from conftest import SHARED_DATA, need_data
from evalplus_agreement import coevo_verdicts, evalplus_verdicts, subset, write_samples

pytestmark = pytest.mark.slow  # HumanEval+ and MBPP+ against evalplus's own evaluator, minutes

pytest.importorskip("evalplus")

# evalplus 0.3.1 marks the canonical HumanEval/32 (find_zero) wrong (its own oracle check on
# the canonical output fails); coevo checks that the polynomial vanishes at the answer.
KNOWN = {"HumanEval/32"}

CASES = [("humanevalplus", "humaneval", "humanevalplus/HumanEvalPlus.jsonl.gz", 40, 3),
         ("mbppplus", "mbpp", "mbppplus/MbppPlus.jsonl.gz", 40, 4)]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name, kind, rel, n, seed", CASES, ids=[c[0] for c in CASES])
def test_verdicts_match_evalplus(tmp_path, name, kind, rel, n, seed):
    src = SHARED_DATA / rel
    need_data(src)
    data = tmp_path / "data.jsonl.gz"
    recs = subset(src, data, n, seed, include=KNOWN)
    samples = tmp_path / "samples.jsonl"
    chosen = write_samples(recs, kind, samples, seed=seed)
    assert {"canonical", "none", "perturb", "big_inputs_fail"} <= set(chosen.values())
    ours, res = coevo_verdicts(name, data, samples, tmp_path / "coevo")
    theirs = evalplus_verdicts(kind, data, samples, tmp_path / "cache")
    assert set(ours) == set(theirs) == set(chosen)
    disagree = {t: (chosen[t], ours[t], theirs[t]) for t in ours
                if ours[t] != theirs[t] and t not in KNOWN}
    assert not disagree, disagree
    for t, m in chosen.items():
        if m == "canonical":
            assert ours[t] == (True, True), t
        if m == "none":
            assert ours[t][1] is False, t
    # some mutation passes the base inputs but not the plus ones: the two figures differ
    assert res["pass@1_base"] >= res["pass@1"]


def test_canonical_pass_rate_is_one(tmp_path):
    """pass@1 = 1.0 for the canonical solutions of a seeded sample of HumanEval+."""
    src = SHARED_DATA / "humanevalplus/HumanEvalPlus.jsonl.gz"
    need_data(src)
    data = tmp_path / "data.jsonl.gz"
    recs = subset(src, data, 30, 7)
    samples = tmp_path / "s.jsonl"
    import json
    samples.write_text("".join(json.dumps({"task_id": r["task_id"],
                                           "completion": r["canonical_solution"]}) + "\n"
                               for r in recs))
    ours, res = coevo_verdicts("humanevalplus", data, samples, tmp_path / "o")
    assert res["pass@1"] == res["pass@1_base"] == 1.0 and res["tasks"] == 30


# float answers (HumanEval/2 with its atol, Mbpp/82), a bool oracle (Mbpp/737), a dict answer
# (Mbpp/88) and a set-equality task (Mbpp/2)
ADVERSARIAL_CASES = [("humanevalplus", "humaneval", "humanevalplus/HumanEvalPlus.jsonl.gz",
                      {"HumanEval/2"}),
                     ("mbppplus", "mbpp", "mbppplus/MbppPlus.jsonl.gz",
                      {"Mbpp/2", "Mbpp/82", "Mbpp/88", "Mbpp/737"})]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name, kind, rel, ids", ADVERSARIAL_CASES, ids=[c[0] for c in ADVERSARIAL_CASES])
def test_adversarial_honest_valued_samples_match_evalplus(tmp_path, name, kind, rel, ids):
    """The canonical answer in other forms (empty, wrapped in a list, a bool, reordered, a float
    for an int, a tuple, numpy, nearly equal, from a program that mutates or returns its
    arguments): every sample gets evalplus's own verdict; ``return []`` and a list around the
    right float fail the float tasks, and the bool answer passes Mbpp/737."""
    from evalplus_agreement import ADVERSARIAL, write_adversarial
    src = SHARED_DATA / rel
    need_data(src)
    data = tmp_path / "data.jsonl.gz"
    recs = subset(src, data, 0, 0, include=ids)
    assert {r["task_id"] for r in recs} == ids
    samples = tmp_path / "adv.jsonl"
    order = write_adversarial(recs, kind, samples)
    ours, _ = coevo_verdicts(name, data, samples, tmp_path / "coevo", every=True)
    theirs = evalplus_verdicts(kind, data, samples, tmp_path / "cache", every=True)
    seen: dict = {}
    verdict = {}
    for tid, k in order:
        i = seen[tid] = seen.get(tid, -1) + 1
        verdict[tid, k] = ours[tid][i]
        assert ours[tid][i] == theirs[tid][i], (tid, k, ours[tid][i], theirs[tid][i])
    assert len(verdict) == len(ids) * len(ADVERSARIAL)
    for tid in ids & {"HumanEval/2", "Mbpp/82"}:
        assert verdict[tid, "empty_list"] == verdict[tid, "wrapped_float"] == (False, False)
        assert verdict[tid, "float_near"] == verdict[tid, "numpy"] == (True, True)
    if "Mbpp/737" in ids:
        assert verdict["Mbpp/737", "as_bool"] == (True, True)
    if "Mbpp/88" in ids:
        assert verdict["Mbpp/88", "reordered"] == (True, True)
