"""Label-free training of one policy (self_majority: SRT/TTRL; frozen labeller), the curriculum,
early stopping with best/ kept, and per-agent problem text; in process, on scripted completions."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from training_helpers import PLUMBING, bundled, scripted_rollout, gold_test_text, tiny_config

from coevo_code.training import train
from coevo_code.training.data import Curriculum
from coevo_code.training.reward import CoevoReward
from coevo_code.training.step import CoevoStep


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _code_rewards(call):
    """{task_index: [code rewards in row order]} of one recorded reward call."""
    _, rows, rewards = call
    out = {}
    for (ti, role, _), r in zip(rows, rewards):
        if role == "code":
            out.setdefault(ti, []).append(r)
    return out


@pytest.mark.slow
def test_self_majority_rewards_the_majority_cluster_and_logs_gold_only(tmp_path):
    tasks = bundled(6)
    cfg = tiny_config(tmp_path / "run", max_steps=2, problems_per_generation=2,
                      per_device_train_batch_size=16, label_source="self_majority")
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    # the scripted plan: [reference x 3, garbage] where index % 3 != 2: the references are the
    # majority; [garbage, wrong, garbage, wrong] where index % 3 == 2: the two wrong programs
    # agree, so self-reward pays its own wrong majority (what a partner corrects)
    seen = set()
    for call in res.trainer.coevo.calls:
        for ti, codes in _code_rewards(call).items():
            want = [0.0, 1.0, 0.0, 1.0] if ti % 3 == 2 else [1.0, 1.0, 1.0, 0.0]
            assert codes == want, (ti, codes)
            seen.add(ti % 3 == 2)
    assert seen == {True, False}
    line = _lines(tmp_path / "run" / "metrics.jsonl")[-1]
    assert line["labelled"] is not None and line["code_acc"] is not None
    assert line["agreement"] is None and line["kappa"] is None  # alone: no peer


def test_frozen_labels_are_written_once_then_read(tmp_path):
    tasks = bundled(4)
    cfg = tiny_config(tmp_path / "run", max_steps=1, problems_per_generation=2,
                      per_device_train_batch_size=16, label_source="frozen", frozen_model="tiny-random")
    train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    f = tmp_path / "run" / "frozen_labels.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    assert {(r["task_id"], r["role"]) for r in recs} == {(t.id, role) for t in tasks
                                                         for role in ("code", "test")}
    assert all(len(r["completions"]) == 4 for r in recs)
    # a hand-written labeller: three references and one wrong program, the gold tests
    good = tmp_path / "frozen.jsonl"
    with open(good, "w") as out:
        for t in tasks:
            ref = f"```python\n{t.references[0]}```"
            out.write(json.dumps({"task_id": t.id, "role": "code",
                                  "completions": [ref] * 3 + ["```python\nprint(1)\n```"]}) + "\n")
            out.write(json.dumps({"task_id": t.id, "role": "test", "completions": [
                gold_test_text(t, t.tests[i % len(t.tests)]) for i in range(4)]}) + "\n")
    before = good.read_bytes()
    cfg = tiny_config(tmp_path / "run2", max_steps=1, problems_per_generation=2,
                      per_device_train_batch_size=16, label_source="frozen",
                      frozen_labels=str(good))
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    assert good.read_bytes() == before
    for ti, codes in _code_rewards(res.trainer.coevo.calls[-1]).items():
        if ti % 3 != 2:
            assert codes == [1.0, 1.0, 1.0, 0.0]
        else:  # the labeller's references make the wrong programs wrong
            assert codes == [0.0, 0.0, 0.0, 0.0]
    missing = tiny_config(tmp_path / "run3", max_steps=1, label_source="frozen",
                          frozen_labels=str(tmp_path / "none.jsonl"))
    with pytest.raises(ValueError, match="no 4 code and test completions for problem"):
        train(missing, PLUMBING, tasks=tasks)


def test_curriculum_passes_over_problems_outside_the_window():
    from coevo_code.training.data import PairedSampler
    cur = Curriculum((0.05, 0.75))
    cur.adopt({"0": 0.9, "1": 0.0, "2": 0.5})  # 3 unseen: kept; 0 too easy; 1 too hard
    s = PairedSampler(n_problems=4, k=1, problems_per_batch=1, batches=8, keep=cur.keep)
    visits = [i // 4 for i in list(s)[::2]]
    assert set(visits) == {2, 3} and cur.skipped > 0
    none = Curriculum((0.05, 0.75))
    none.adopt({str(i): 1.0 for i in range(4)})  # all rejected: never stalls
    s = PairedSampler(n_problems=4, k=1, problems_per_batch=1, batches=5, keep=none.keep)
    assert len(list(s)) == 10
    off = Curriculum((0.05, 0.75), enabled=False)
    off.adopt({"0": 1.0})
    assert off.keep(0)


def test_curriculum_in_a_run_learns_estimates_and_skips(tmp_path):
    tasks = bundled(6)
    cfg = tiny_config(tmp_path / "run", max_steps=6, problems_per_generation=2,
                      per_device_train_batch_size=16, label_source="self_majority",
                      curriculum=True, curriculum_window=[0.6, 1.0], save_strategy="steps",
                      save_steps=3)
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    est = res.trainer.coevo.lockstep.curriculum.snapshot()
    assert est and all(0.0 <= v <= 1.0 for v in est.values())
    assert _lines(tmp_path / "run" / "metrics.jsonl")[-1]["curriculum_skipped"] > 0
    saved = json.loads((tmp_path / "run" / "checkpoint-3" / "coevo_state.json").read_text())
    assert saved["curriculum"]  # resumed runs start from the same estimates


@pytest.mark.slow
def test_early_stopping_keeps_best_and_stops(tmp_path):
    cfg = tiny_config(tmp_path / "run", max_steps=6, eval_tasks="bundled", eval_tasks_limit=2,
                      eval_steps=1, per_device_eval_batch_size=8, keep_best=True,
                      early_stopping_patience=1)
    res = train(cfg, PLUMBING)
    assert res.global_step == 2  # eval 1 sets the best, eval 2 does not beat it
    best = json.loads((tmp_path / "run" / "best" / "best.json").read_text())
    assert best["step"] == 1 and (tmp_path / "run" / "best" / "config.json").exists()


def test_problem_field_shows_another_text_and_names_a_missing_one():
    import dataclasses

    from coevo_code.tasks import LoaderError
    from coevo_code.training.run import shown_tasks
    t = bundled(2)
    t = [dataclasses.replace(t[0], metadata={"rephrased": "Say it differently."}), t[1]]
    assert shown_tasks(t[:1], "rephrased")[0].prompt == "Say it differently."
    assert shown_tasks(t, None) is t
    with pytest.raises(LoaderError, match=f"problem {t[1].id} has no such text"):
        shown_tasks(t, "rephrased")


def test_reward_refuses_agents_out_of_step():
    from coevo_code.training.scoring import RewardOptions

    class Fake:
        agents = ["a", "b"]

        def swap(self, key, payload):
            other = dict(payload, problems=list(reversed(payload["problems"])))
            return [payload, other]

    tasks = bundled(2)
    r = CoevoReward(CoevoStep({"train": tasks}, RewardOptions(label_source="partner"),
                              exchange=Fake(), n_agents=2))
    rows = [(0, "code"), (0, "test"), (1, "code"), (1, "test")]
    with pytest.raises(RuntimeError, match="agents out of step at train/step-0/call-0"):
        r(completions=["x"] * 4, role=[x[1] for x in rows], task_index=[x[0] for x in rows],
          split=["train"] * 4)


def test_without_gold_tests_the_gold_metrics_are_null_and_training_runs(tmp_path):
    import dataclasses
    tasks = bundled(4)
    unlabelled = [dataclasses.replace(t, tests=[]) for t in tasks]  # the data has no gold
    cfg = tiny_config(tmp_path / "run", max_steps=1, problems_per_generation=2,
                      per_device_train_batch_size=16, label_source="self_majority")
    res = train(cfg, PLUMBING, tasks=unlabelled, rollout_func=scripted_rollout(tasks, 4))
    line = _lines(tmp_path / "run" / "metrics.jsonl")[0]
    for key in ("code_acc", "bon_acc", "pseudo_label_acc", "ut_acc"):
        assert line[key] is None, key
    assert line["labelled"] > 0 and line["reward_code_mean"] is not None
    assert line["time_exchange"] is not None and res.global_step == 1


def test_partner_rewards_never_read_the_gold_tests(executor):
    """Co-RL's rewards come from the partner's tests and votes only: each agent's rewards are the
    same when the problems carry their gold tests and when those are removed; the gold tests
    only feed the logged metrics (code_acc is None without them)."""
    import dataclasses

    from coevo_code.tasks import load_tasks
    from coevo_code.training.joint import prepare_joint, score_joint
    from coevo_code.training.scoring import RewardOptions
    from training_helpers import wrong_test

    tasks = list(load_tasks("world", split="heldout", seed=0))
    picked = {}
    for t in tasks:  # one problem of each of six families: three stdio, three functional
        if sum(p.kind == t.kind for p in picked.values()) < 3:
            picked.setdefault(t.metadata["family"], t)
    opts = RewardOptions(label_source="partner")

    def fenced(program):
        return f"```python\n{program}```"

    def rewards(task, judged_as, me):
        ref, bad = task.references[0], task.metadata["mutants"][0]
        blocks = [([fenced(ref), fenced(ref), fenced(bad), fenced(ref)],
                   [gold_test_text(task, task.tests[0]), gold_test_text(task, task.tests[1]),
                    wrong_test(task), "no test here"]),
                  ([fenced(bad), fenced(ref), fenced(bad), fenced(bad)],
                   [gold_test_text(task, task.tests[2]), wrong_test(task),
                    gold_test_text(task, task.tests[3]), gold_test_text(task, task.tests[4])])]
        jb = prepare_joint(judged_as, blocks, me, 2, opts, [1] * 4, [1] * 4)
        res = executor.run(jb.jobs)
        s = score_joint(jb, res[0], res[1] if jb.probe_job is not None else None, opts)
        return s.code_rewards, s.test_rewards, s.n_correct

    signal = 0
    for task in picked.values():
        no_gold = dataclasses.replace(task, tests=[])
        for me in (0, 1):
            code, test, n_correct = rewards(task, task, me)
            code_ng, test_ng, n_correct_ng = rewards(task, no_gold, me)
            assert (code, test) == (code_ng, test_ng), (task.metadata["family"], me)
            assert n_correct == (3 if me == 0 else 1) and n_correct_ng is None  # gold: logged
            signal += sum(r is not None for r in code + test)
    assert signal >= len(picked) * 8  # most rows carry a reward: the check is not vacuous
