"""Pairs and rings (Co-RL) on CPU: two tiny models of different families (Qwen2-style and
Llama-style, each with its own tokenizer), one process each, exchanging completions through the
real TCPStore; labels off (gold tests only for the logged metrics)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "pair_agent_script.py"
ROOT = HERE.parent
PAIR_YAML = ROOT / "configs" / "pair-tiny-random-cpu.yaml"
ENV = dict(os.environ, OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")


def _scripted(tmp_path, agents, source, steps, processes=None):
    """Run the scripted agents (name, model) as separate processes around one store; an agent
    given 2 ``processes`` runs under torchrun (CPU, gloo), its ranks' rows merged in order."""
    from coevo_code.training.exchange import host_store
    store = host_store()
    env = dict(ENV, COEVO_EXCHANGE=f"127.0.0.1:{store.port}")
    names = ",".join(a for a, _ in agents)
    processes = processes or {}
    procs = []
    for name, model in agents:
        n = processes.get(name, 1)
        head = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node", str(n)] if n > 1 else [sys.executable])
        procs.append(subprocess.Popen(head + [str(SCRIPT), str(tmp_path), name, names, source,
                                              model, str(steps)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for (name, _), p, out in zip(agents, procs, outs):
        assert p.returncode == 0, f"{name}:\n{out[-3000:]}"
    got = {}
    for name, _ in agents:
        rec = json.loads((tmp_path / f"{name}.calls.json").read_text())
        for r in range(1, processes.get(name, 1)):
            other = json.loads((tmp_path / f"{name}.rank{r}.calls.json").read_text())
            for mine, theirs in zip(rec["calls"], other["calls"]):
                mine["rows"] += theirs["rows"]
                mine["rewards"] += theirs["rewards"]
        got[name] = rec
    return got


def _groups(call):
    """{task_index: {"code": [(text, reward)], "test": [...]}} of one recorded reward call."""
    out = {}
    for (ti, role, text), r in zip(call["rows"], call["rewards"]):
        out.setdefault(ti, {"code": [], "test": []})[role].append((text, r))
    return out


def _problems(call):
    seen = []
    for ti, _, _ in call["rows"]:
        if not seen or seen[-1] != ti:
            seen.append(ti)
    return seen


def _stdio(tasks_ids, ti):
    from coevo_code.tasks import load_tasks
    return next(t for t in load_tasks("bundled") if t.id == tasks_ids[ti]).kind == "stdio"


@pytest.mark.parametrize("qwen_processes", [1, 2])
@pytest.mark.slow
def test_scripted_pair_lockstep_across_epochs_and_rewards_from_the_partner(tmp_path,
                                                                           qwen_processes):
    # with 2: qwen trains on two processes of its own (torchrun); its main process swaps and
    # scores the gathered batch, and each process takes its rows back
    got = _scripted(tmp_path, [("qwen", "tiny-random"), ("llama", "tiny-llama-random")], "partner", 8,
                    {"qwen": qwen_processes})
    q, l = got["qwen"], got["llama"]  # noqa: E741 - q and l: the qwen and llama runs
    assert q["steps"] == l["steps"] == 8 and len(q["calls"]) == len(l["calls"]) == 8
    # lockstep: the same problems, in the same order, at every step; 32 visits of 26 problems
    # cross the pass boundary (26 distinct first, then repeats) at the 7th step
    visits = []
    for cq, cl in zip(q["calls"], l["calls"]):
        assert _problems(cq) == _problems(cl)
        visits += _problems(cq)
    assert len(visits) == 32 and len(set(visits[:26])) == 26 and set(visits[26:]) <= set(visits)
    for mets in (tmp_path / "qwen" / "metrics.jsonl", tmp_path / "llama" / "metrics.jsonl"):
        lines = [json.loads(x) for x in mets.read_text().splitlines()]
        assert [x["step"] for x in lines] == list(range(1, 9))
        for key in ("agreement", "kappa", "pseudo_label_acc", "pseudo_label_kappa", "labelled",
                    "cross_bon"):
            assert key in lines[0]
    # qwen is labelled by llama. Its reference solutions (rows 0, 1) earn 1 and its wrong one
    # (row 2) 0 at every step but the one where llama plants a wrong answer on the stdio
    # problems: there the references earn 0 and the wrong program 1.
    ids = q["tasks"]
    planted = flipped = 0
    for step, call in enumerate(q["calls"]):
        for ti, g in _groups(call).items():
            codes = [r for _, r in g["code"]]
            if step == 2 and _stdio(ids, ti):
                assert codes[0] == codes[1] == 0.0 and codes[2] == 1.0, (step, ti, codes)
                flipped += 1
            else:
                assert codes[0] == codes[1] == 1.0 and codes[2] == 0.0, (step, ti, codes)
            assert codes[3] == 0.0  # garbage: the lowest code reward
        planted += step == 2
    assert flipped >= 1
    # llama is labelled by qwen, which never lies: llama's planted wrong solutions earn 0
    for ti, g in _groups(l["calls"][2]).items():
        codes = [r for _, r in g["code"]]
        if _stdio(ids, ti):
            assert codes == [0.0] * 4
        else:
            assert codes[:3] == [1.0] * 3 and codes[3] == 0.0
    # logged diagnostics: pseudo-labels against gold (qwen's are perfect where honest)
    lines = [json.loads(x) for x in (tmp_path / "qwen" / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["pseudo_label_acc"] == 1.0 and lines[0]["labelled"] == 1.0
    assert lines[0]["pseudo_label_kappa"] == 1.0
    assert lines[2]["pseudo_label_acc"] < 1.0 and lines[2]["pseudo_label_kappa"] < 1.0
    assert lines[0]["code_acc"] == 0.5  # 2 of 4 solutions pass the gold tests
    assert 0.0 <= lines[0]["agreement"] <= 1.0


@pytest.mark.slow
def test_scripted_ring_of_three_each_labelled_by_its_predecessor(tmp_path):
    # ring order qwen -> llama -> qwen2 -> qwen: llama labels qwen2, qwen2 labels qwen
    got = _scripted(tmp_path, [("qwen", "tiny-random"), ("llama", "tiny-llama-random"), ("qwen2", "tiny-random")],
                    "ring", 3)
    ids = got["qwen"]["tasks"]
    for name in ("qwen", "llama", "qwen2"):
        assert got[name]["steps"] == 3
    for ti, g in _groups(got["qwen2"]["calls"][2]).items():  # labelled by the planter
        codes = [r for _, r in g["code"]]
        if _stdio(ids, ti):
            assert codes[:3] == [0.0, 0.0, 1.0]
    for ti, g in _groups(got["qwen"]["calls"][2]).items():   # labelled by qwen2: unaffected
        codes = [r for _, r in g["code"]]
        assert codes[:3] == [1.0, 1.0, 0.0]


# ---- the launcher -------------------------------------------------------------------------------
def _coevo(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "coevo_code.cli", "train", *args], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _wait_lines(path: Path, n: int, proc, timeout=240):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{path} did not reach {n} lines")


def _pids(run: Path) -> dict:
    lines = (run / "launcher.pid").read_text().split("\n")
    return {"launcher": int(lines[0]), **{n: int(p) for n, p in
                                          (x.split() for x in lines[1:] if x.strip())}}


@pytest.mark.slow
def test_pair_command_runs_and_killing_one_agent_stops_the_other_with_its_name(tmp_path):
    run = tmp_path / "pair"
    p = _coevo("--config", str(PAIR_YAML), "--output-dir", str(run), "--max_steps", "40",
               "--exchange_timeout_s", "60")
    _wait_lines(run / "llama" / "metrics.jsonl", 2, p)
    os.kill(_pids(run)["llama"], signal.SIGKILL)
    t0 = time.time()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1
    assert time.time() - t0 < 30  # named at once (the launcher marks the exit), not at the timeout
    assert "agent 'llama' failed (exit -9)" in err, err[-2000:]
    log = (run / "qwen" / "agent.log").read_text()
    assert "agent 'llama' exited with code -9" in log, log[-2000:]


@pytest.mark.slow
def test_a_stalled_agent_is_named_after_the_timeout_and_stopped(tmp_path):
    run = tmp_path / "pair"
    p = _coevo("--config", str(PAIR_YAML), "--output_dir", str(run), "--max_steps", "40",
               "--exchange_timeout_s", "5")
    _wait_lines(run / "llama" / "metrics.jsonl", 2, p)
    llama = _pids(run)["llama"]
    os.kill(llama, signal.SIGSTOP)  # alive, silent
    t0 = time.time()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1 and time.time() - t0 < 40
    assert "agent 'llama' stalled" in err and "within 5 s" in err, err[-2000:]
    with pytest.raises(ProcessLookupError):  # the launcher stopped it
        os.kill(llama, 0)


@pytest.mark.slow
def test_ring_of_three_through_the_command(tmp_path):
    cfg = tmp_path / "ring.yaml"
    text = PAIR_YAML.read_text().replace("label_source: partner", "label_source: ring")
    text += "  - name: qwen-b\n    model_name_or_path: tiny-random\n    learning_rate: 5.0e-4\n"
    cfg.write_text(text)
    run = tmp_path / "ring"
    p = _coevo("--config", str(cfg), "--output_dir", str(run), "--max_steps", "3")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    for name in ("qwen", "llama", "qwen-b"):
        lines = [json.loads(x) for x in (run / name / "metrics.jsonl").read_text().splitlines()]
        assert [x["step"] for x in lines] == [1, 2, 3]
        assert (run / name / "final" / "config.json").exists()
    assert json.loads((run / "llama" / "final" / "config.json").read_text())["model_type"] == "llama"
    rep = subprocess.run([sys.executable, "-m", "coevo_code.cli", "report", str(run)], env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    for f in ("pair.png", "cross_bon.png", "qwen/accuracy.png", "qwen-b/rewards.png"):
        assert (run / f).stat().st_size > 5000, f


@pytest.mark.slow
def test_pair_resume_after_sigkill_of_the_launcher_logs_every_step_once(tmp_path):
    run = tmp_path / "pair"
    p = _coevo("--config", str(PAIR_YAML), "--output_dir", str(run), "--max_steps", "6",
               "--save_steps", "1", start_new_session=True)
    _wait_lines(run / "qwen" / "metrics.jsonl", 3, p)
    _wait_lines(run / "llama" / "metrics.jsonl", 3, p)
    pids = _pids(run)
    os.kill(pids["launcher"], signal.SIGKILL)
    p.communicate(timeout=60)
    for name in ("qwen", "llama"):  # the agents die with their launcher
        t0 = time.time()
        while time.time() - t0 < 60:
            try:
                os.kill(pids[name], 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"{name} outlived its launcher")
    r = _coevo("--resume", str(run))
    _, err = r.communicate(timeout=600)
    assert r.returncode == 0, err[-3000:]
    import re
    resumed = re.search(r"resuming qwen, llama from step (\d+)", err)
    assert resumed and int(resumed.group(1)) >= 2, err[-2000:]  # from checkpoints, not scratch
    for name in ("qwen", "llama"):
        lines = [json.loads(x) for x in (run / name / "metrics.jsonl").read_text().splitlines()]
        assert [x["step"] for x in lines] == list(range(1, 7)), name
        assert (run / name / "checkpoint-6").is_dir()


@pytest.mark.slow
def test_bad_pair_configs_are_named(tmp_path):
    from coevo_code.training.pair import PairError, load_pair, validate
    base = PAIR_YAML.read_text()
    llama = "  - name: llama\n    model_name_or_path: tiny-llama-random\n"
    cases = [
        (llama, llama + "    max_steps: 3\n", "agent 'llama' sets max_steps"),
        (llama, llama + "    per_device_train_batch_size: 16\n", "same rows per optimiser step"),
        (llama, llama + "    launch: {gpus: 2}\n", "unknown launch key"),
        ("label_source: partner", "label_source: parter", "label_source"),
        ("  - name: llama", "  - name: qwen", "must be unique"),
    ]
    for old, new, needle in cases:
        f = tmp_path / "bad.yaml"
        f.write_text(base.replace(old, new))
        with pytest.raises(PairError, match=needle):
            validate(load_pair(str(f), []))
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--config", str(f)],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "must be unique" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.slow
def test_early_stopping_in_a_pair_stops_both_agents_after_the_same_step(tmp_path):
    run = tmp_path / "pair"
    p = _coevo("--config", str(PAIR_YAML), "--output_dir", str(run), "--max_steps", "10",
               "--eval_tasks", "bundled", "--eval_tasks_limit", "2", "--eval_steps", "1",
               "--per_device_eval_batch_size", "8", "--early_stopping_patience", "1",
               "--keep_best")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    # the random models never beat their first eval: llama's and qwen's second eval (step 2)
    # asks to stop; the request rides on step 3's exchange and both stop after step 3
    for name in ("qwen", "llama"):
        lines = [json.loads(x) for x in (run / name / "metrics.jsonl").read_text().splitlines()]
        assert [x["step"] for x in lines] == [1, 2, 3], name
        assert json.loads((run / name / "best" / "best.json").read_text())["step"] == 1


@pytest.mark.slow
def test_curriculum_in_a_pair_keeps_both_agents_on_the_same_problems(tmp_path):
    # the random models' votes find no cluster (estimate 0, below the window): once seen, a
    # problem is passed over; both agents follow the first agent's estimates, so they skip alike
    # (a divergence would stop the run with "agents out of step")
    run = tmp_path / "pair"
    p = _coevo("--config", str(PAIR_YAML), "--output_dir", str(run), "--curriculum")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    skipped = {}
    for name in ("qwen", "llama"):
        lines = [json.loads(x) for x in (run / name / "metrics.jsonl").read_text().splitlines()]
        skipped[name] = [x["curriculum_skipped"] for x in lines]
    assert skipped["qwen"] == skipped["llama"] and skipped["qwen"][-1] > 0


def test_a_pair_run_directory_is_not_overwritten(tmp_path):
    run = tmp_path / "pair"
    (run / "llama").mkdir(parents=True)
    (run / "llama" / "metrics.jsonl").write_text('{"step": 1}\n')
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--config",
                        str(PAIR_YAML), "--output_dir", str(run)], env=ENV, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "already holds a run" in p.stderr and "--resume" in p.stderr
    assert (run / "llama" / "metrics.jsonl").read_text() == '{"step": 1}\n'
