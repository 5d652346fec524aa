"""The repair warm start (``coevo_code/assets/tiny-repair``, made by ``scripts/make_tiny_model.py
--arch qwen2 --repair``): the shipped files, its repair examples (built with the production
feedback and conversation functions, from the problem's own tests only, as the judge reports
them), and the other models' corpus left as it was."""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from coevo_code.repair import feedback_message, repair_messages
from coevo_code.roles import coder_messages, parse_program
from coevo_code.tasks import world
from training_helpers import make_tiny_model_module

ROOT = Path(__file__).resolve().parent.parent
ASSET = ROOT / "coevo_code" / "assets" / "tiny-repair"


@pytest.fixture(scope="module")
def mtm():
    return make_tiny_model_module()


@pytest.fixture(scope="module")
def tasks():
    return world.generate("sft", size=60)


# ---- the shipped model ---------------------------------------------------------------------------
def test_shipped_files_are_small_half_precision_and_say_repair():
    names = sorted(p.name for p in ASSET.iterdir())
    assert names == sorted(p.name for p in (ASSET.parent / "tiny").iterdir())
    assert (ASSET / "model.safetensors").stat().st_size <= 2.5 * 2 ** 20
    assert sum(p.stat().st_size for p in ASSET.iterdir()) <= 3 * 2 ** 20
    prov = json.loads((ASSET / "provenance.json").read_text())
    assert prov["arch"] == "qwen2" and prov["params"] <= 1_250_000
    assert prov["repair"]["rows"] > 1000 and prov["sft_rows"] > 12000
    cfg = json.loads((ASSET / "config.json").read_text())
    tiny = json.loads((ASSET.parent / "tiny" / "config.json").read_text())
    same = ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "tie_word_embeddings")
    assert {k: cfg[k] for k in same} == {k: tiny[k] for k in same}
    assert cfg.get("dtype", cfg.get("torch_dtype")) == "float16"


def test_loads_and_renders_a_repair_conversation(tasks, mtm):
    import torch
    from transformers import AutoModelForCausalLM

    from coevo_code.generation.tiny import is_tiny, is_warm, load_tiny
    assert is_tiny("tiny-repair") and is_warm("tiny-repair")
    model, tok = load_tiny("tiny-repair")
    assert next(model.parameters()).dtype == torch.float32
    assert isinstance(AutoModelForCausalLM.from_pretrained(ASSET), torch.nn.Module)
    ex = mtm.repair_example(random.Random(0), "qwen2", tasks[0])
    text = tok.apply_chat_template(ex["prompt"], tokenize=False, add_generation_prompt=True)
    assert text.count("<|im_start|>user\n") == 2 and text.count("<|im_start|>assistant\n") == 2
    assert text.endswith("<|im_start|>assistant\n") and "Your solution failed" in text
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text and 100 < len(ids) < 448  # SFT rows are cut at 512
    with torch.no_grad():
        out = model(torch.tensor([ids])).logits
    assert out.shape == (1, len(ids), len(tok))


# ---- the repair examples -------------------------------------------------------------------------
def _shown(task, message: str) -> list[tuple[str, str, str | None]]:
    """(input or call, expected, the program's output or None) of each test a message shows."""
    out = []
    for block in message.split("\n\nTest ")[1:]:
        if task.kind == "stdio":
            m = re.search(r"Input:\n(.*)\nExpected output:\n(.*)\nYour output:\n(.*)", block)
            if m is None:
                m = re.search(r"Input:\n(.*)\nExpected output:\n(.*)\nResult: ", block)
                out.append((m.group(1), m.group(2), None))
            else:
                out.append(m.groups())
        else:
            m = re.search(r"Call:\n(.*)\nExpected:\n(.*)\nResult: ", block)
            out.append((m.group(1), m.group(2), None))
    return out


def test_repair_examples_are_the_production_turn_two_from_the_problems_own_tests(tasks, mtm):
    rng = random.Random(1)
    seen = set()
    for task in tasks:
        meta = task.metadata
        ex = mtm.repair_example(rng, "qwen2", task)
        mutants = world.mutant_exprs(task)
        if ex["first"] == meta["expr"]:
            _check_keep(task, ex, mtm)
            seen.add("keep")
            continue
        assert ex["first"] in mutants
        assert ex["revision"] in mutants + [meta["expr"]]
        seen.add("right" if ex["revision"] == meta["expr"] else
                 "same" if ex["revision"] == ex["first"] else "other")
        prompt = ex["prompt"]
        feedback = prompt[3]["content"]
        assert prompt == repair_messages(coder_messages(task),
                                         mtm.code_completion(task, ex["first"]), feedback)
        assert feedback.startswith("Your solution failed") and "Fix the program" in feedback
        shown = _shown(task, feedback)
        assert 1 <= len(shown) <= 2
        f = world.FAMILIES[meta["family"]]
        for inp, expected, got in shown:  # every shown test is one of the problem's own
            if task.kind == "stdio":
                test = next(t for t in task.tests if t.input == inp + "\n")
                assert test.output == expected + "\n"
                value = mtm.test_value(task, test)
                if got is not None:  # what the first program prints there
                    assert got + "\n" == world.render_output(
                        f, world.evaluate(ex["first"], meta["var"], value))
            else:
                assert f"assert {inp} == {expected}" in [t.code for t in task.tests]
        # the message is feedback_message of the results the script computes
        n = int(re.search(r"of (\d+) test", feedback).group(1))
        assert n in mtm.REPAIR["feedback_tests"]
        code = ex["completion"][0]["content"]
        assert parse_program(code, task).ok
        assert code == mtm.code_completion(task, ex["revision"])
    assert seen == {"right", "same", "other", "keep"}


def _check_keep(task, ex, mtm):
    """A keep example: the right program, shown tests it fails because their expected output is
    a mutant's (never the right one), and revised into itself."""
    meta = task.metadata
    f = world.FAMILIES[meta["family"]]
    feedback = ex["prompt"][3]["content"]
    right = mtm.code_completion(task, meta["expr"])
    assert ex["prompt"] == repair_messages(coder_messages(task), right, feedback)
    assert ex["completion"][0]["content"] == right
    n, total = map(int, re.search(r"failed (\d+) of (\d+) test", feedback).groups())
    assert total == mtm.REPAIR["keep_tests"] and n in mtm.REPAIR["keep_wrong"]
    shown = _shown(task, feedback)
    assert 1 <= len(shown) <= 2
    for inp, expected, got in shown:
        if task.kind == "stdio":
            value = mtm.test_value(task, world.TestCase(input=inp + "\n", output=""))
            want = world.render_output(f, world.evaluate(meta["expr"], meta["var"], value))
            assert expected + "\n" != want and got + "\n" == want
            assert expected + "\n" in _mutant_outputs(task, value)
        else:
            assert f"assert {inp} == {expected}" not in [t.code for t in task.tests]
            value = ast.literal_eval(ast.parse(inp, mode="eval").body.args[0])
            assert expected != world.render_output(
                f, world.evaluate(meta["expr"], meta["var"], value))
            assert expected in _mutant_outputs(task, value)


def _mutant_outputs(task, value) -> set:
    f, out = world.FAMILIES[task.metadata["family"]], set()
    for m in world.mutant_exprs(task):
        try:
            out.add(world.render_output(f, world.evaluate(m, task.metadata["var"], value)))
        except (IndexError, ValueError):
            pass
    return out


def test_feedback_results_match_the_sandbox(tasks, mtm, executor):
    """The execution-free results the corpus is built from are what the judge reports."""
    jobs, want = [], []
    for task in tasks[:26]:
        f = world.FAMILIES[task.metadata["family"]]
        exprs = world.mutant_exprs(task) + [task.metadata["expr"]]
        jobs.append(task.job([world.program(f, e, task.entry_point or "", task.metadata["var"])
                              for e in exprs], task.tests, return_outputs=True, id=task.id))
        want.append([[(r.outcome, r.output) for r in mtm.feedback_results(task, e, task.tests)]
                     for e in exprs])
    for res, w in zip(executor.run(jobs), want):
        got = [list(zip(o, out)) for o, out in zip(res["outcomes"], res["outputs"])]
        assert got == w
        assert all(o == "ok" for o, _ in w[-1])  # the reference passes its own tests


def test_feedback_message_of_a_mistake_names_it(tasks, mtm):
    task = next(t for t in tasks if t.kind == "stdio")
    first = world.mutant_exprs(task)[0]
    msg = feedback_message(mtm.feedback_results(task, first, task.tests))
    assert msg is not None and "Your output:" in msg


def test_repair_rows_share_and_revisions(mtm):
    rows = mtm.repair_rows("qwen2", 200)
    assert 0.4 * 200 <= len(rows) <= 0.6 * 200
    assert all(set(r) == {"prompt", "completion"} and len(r["prompt"]) == 4 for r in rows)


def test_the_other_models_corpus_is_unchanged(mtm):
    """The repair examples come from their own random stream: ``tiny``'s and ``tiny-llama``'s
    corpus (and so their tokenizer: the reproduction fingerprint's hash) are as before."""
    stored = json.loads((ROOT / "tests" / "fixtures" / "tiny_fingerprint.json").read_text())
    for arch in ("qwen2", "llama"):
        rows = mtm.sft_rows(arch, 200)
        fast = mtm.make_tokenizer(mtm.corpus_world(rows), arch == "llama",
                                  1024 if arch == "llama" else 1280, digits=True)
        got = hashlib.sha256(fast.backend_tokenizer.to_str().encode()).hexdigest()
        assert got == stored[arch]["tokenizer_sha256"], arch
