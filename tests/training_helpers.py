"""Shared by the training tests and the scripts they launch (torchrun, kill-and-resume)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from trl import ModelConfig

from coevo_code.tasks import load_tasks
from coevo_code.training.config import CoevoConfig
from coevo_code.training.data import paired_rows

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func: TRL's hook, used on purpose


# The plumbing tests' run: the random tiny model (small and fast) on the bundled problems, no
# held-out evaluation; the warm-started default run has tests of its own (test_learning.py).
PLUMBING_YAML = Path(__file__).resolve().parent / "fixtures" / "plumbing.yaml"
PLUMBING = ModelConfig(model_name_or_path="tiny-random")


def make_tiny_model_module():
    """``scripts/make_tiny_model.py`` as a module."""
    import sys
    scripts = str(Path(__file__).resolve().parents[1] / "scripts")
    sys.path.insert(0, scripts)
    try:
        import make_tiny_model
    finally:
        sys.path.remove(scripts)
    return make_tiny_model


def rollout_output(tok, prompts, texts) -> dict:
    """What a TRL ``rollout_func`` returns for scripted completions ``texts`` of ``prompts``
    (conversations): the chat-templated prompt ids and each text's ids plus EOS."""
    prompt_ids, completion_ids = [], []
    for p, text in zip(prompts, texts):
        enc = tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True,
                                      return_dict=True)
        prompt_ids.append(list(enc["input_ids"]))
        completion_ids.append(tok(text)["input_ids"] + [tok.eos_token_id])
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


def tiny_config(output_dir, **overrides) -> CoevoConfig:
    base = yaml.safe_load(PLUMBING_YAML.read_text())
    base.update(output_dir=str(output_dir), save_strategy="no", disable_tqdm=True)
    base.update(overrides)
    return CoevoConfig(**base)


def bundled(n=None):
    ts = list(load_tasks("bundled"))
    return ts[:n] if n else ts


def wrong_program(task) -> str:
    if task.kind == "functional":
        return f"def {task.entry_point}(*args, **kwargs):\n    return None\n"
    return "print('wrong')\n"


def gold_test_text(task, case) -> str:
    if case.code is not None:
        return f"```python\n{case.code}\n```"
    return f"**Test Input:**\n```\n{case.input}```\n\n**Test Output:**\n```\n{case.output}```"


def wrong_test(task) -> str:
    g = task.tests[0]
    if g.code is not None:
        return f"```python\nassert {task.entry_point}(12345) == 'surely not'\n```"
    return f"**Test Input:**\n```\n{g.input}```\n\n**Test Output:**\n```\nsurely not\n```"


GARBAGE = "I am not sure what to write here."


def plan(task, index, role, j, variant=0):
    """The scripted completion j of a (problem, role) group. Problems with index % 3 == 2 get
    only wrong solutions (so no solution passes their gold tests)."""
    if role == "code":
        if index % 3 == 2:
            return f"```python\n{wrong_program(task)}```" if j % 2 else GARBAGE
        choice = [f"```python\n{task.references[0]}```"] * 2 + [
            [f"```python\n{task.references[0]}```", f"```python\n{wrong_program(task)}```",
             GARBAGE][variant % 3], GARBAGE]
        return choice[j % 4]
    return [gold_test_text(task, task.tests[-1]), wrong_test(task), GARBAGE,
            gold_test_text(task, task.tests[0])][j % 4]


def scripted_rollout(tasks, k, random_variant=False, choose=None):
    """A TRL ``rollout_func`` returning scripted completions; the position of a row in its group
    comes from its global position in the generation batch (k code rows then k test rows per
    problem), so it is the same however the batch is split over processes. ``choose(task_index,
    role, j, trainer)`` replaces :func:`plan` (the pair tests script each agent their own way)."""
    import torch
    lookup = {}
    for row in paired_rows(tasks, "train", 1):
        lookup[row["prompt"][-1]["content"]] = (row["task_index"], row["role"])

    def rollout(prompts, trainer):
        tok = trainer.processing_class
        offset = trainer.accelerator.process_index * len(prompts)
        texts = []
        for i, p in enumerate(prompts):
            ti, role = lookup[p[-1]["content"]]
            j = (offset + i) % k
            if choose is not None:
                texts.append(choose(ti, role, j, trainer))
            else:
                variant = int(torch.randint(0, 3, (1,))) if random_variant else 0
                texts.append(plan(tasks[ti], ti, role, j, variant))
        return rollout_output(tok, prompts, texts)

    return rollout


def expected_rewards(tasks, texts_by_row, options, executor):
    """Recompute rewards for rows given as (task_index, role, text) with the pure scoring."""
    from coevo_code.training.scoring import prepare, score
    groups = {}
    for pos, (ti, role, text) in enumerate(texts_by_row):
        groups.setdefault(ti, {"code": [], "test": []})[role].append(pos)
    out = [None] * len(texts_by_row)
    for ti, g in groups.items():
        b = prepare(tasks[ti], [texts_by_row[p][2] for p in g["code"]],
                    [texts_by_row[p][2] for p in g["test"]], options,
                    [1] * len(g["code"]), [1] * len(g["test"]))
        res = executor.run([b.job])[0] if b.job else None
        s = score(b, res, options)
        for p, r in zip(g["code"], s.code_rewards):
            out[p] = r
        for p, r in zip(g["test"], s.test_rewards):
            out[p] = r
    return out


def scripted_sampler(tasks):
    """A stand-in for ``coevo_code.evaluation.heldout.sample`` (monkeypatched in): the scripted
    completions of :func:`plan` for the evaluation prompts; greedy: the reference, or a wrong
    program where every sampled solution is wrong (index % 3 == 2)."""
    lookup = {}
    for row in paired_rows(tasks, "eval", 0):
        lookup[row["prompt"][-1]["content"]] = (row["task_index"], row["role"])

    def sample(model, tokenizer, conversations, n, temperature, max_new_tokens, seed,
               batch_size=32):
        out = []
        for c in conversations:
            ti, role = lookup[c[-1]["content"]]
            if not temperature:
                ok = ti % 3 != 2
                out.append([f"```python\n{tasks[ti].references[0] if ok else wrong_program(tasks[ti])}```"] * n)
            else:
                out.append([plan(tasks[ti], ti, role, j) for j in range(n)])
        return out
    return sample


def length_bonus(completions, **kwargs):
    """An extra TRL-style reward for the tests of ``reward_funcs``: a row's completion length
    in characters, divided by 100 (never None, so it has a value on every row)."""
    from coevo_code.roles import completion_text
    return [len(completion_text(c)) / 100 for c in completions]
