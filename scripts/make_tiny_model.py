"""Make the tiny models that ship with the package (``coevo_code/assets/``).

Warm-started (what ``tiny`` and ``tiny-llama`` mean everywhere: training, evaluation, the frozen
labeller): a byte-level BPE tokenizer trained on the task world (digits split one by one), an
architecture config of at most 1.25 M parameters, and weights fine-tuned with TRL's ``SFTTrainer``
on the world's ``sft`` split, with the production prompts and completion formats, to a mediocre
start. The fine-tuning corpus holds each family's natural mistakes (the world's mutants: an
off-by-one, a wrong constant, a wrong end or separator) at rates set per model family
(:data:`PROFILES`): each model family is weak on half of the task families, where one mistake is
its most common answer, and the two model families are weak on opposite halves.

    python scripts/make_tiny_model.py --arch qwen2           # coevo_code/assets/tiny/
    python scripts/make_tiny_model.py --arch llama           # coevo_code/assets/tiny-llama/
    python scripts/make_tiny_model.py --arch qwen2 --check   # also score held-out problems
    python scripts/make_tiny_model.py --quick --fingerprint  # the reproduction fingerprint

Repair warm start (``tiny-repair``: a model that revises a failed solution now and then, so that
reinforcement learning with repair turns has something to improve): ``--repair`` adds to
``tiny``'s corpus, for half of the ``sft`` problems (:data:`REPAIR`), the second turn of a repair
episode, in the production format: the prompt is :func:`coevo_code.repair.repair_messages` of the
coder prompt, a first answer computing one of the problem's mutants (drawn as the profile draws
its mistakes) and :func:`coevo_code.repair.feedback_message` of that program's results on four or
all eight of the problem's own gold tests (computed without running it, as the world computes its
gold outputs, and equal to what the judge reports); the completion is the right program (40%),
the same mistake again (40%) or another mutant (20%). The other rows, and the other models'
corpus, do not change. ``--check-repair`` scores turn 1 and one repair turn on held-out problems
(feedback from the gold tests; alone, of the shipped ``tiny-repair``).

    python scripts/make_tiny_model.py --arch qwen2 --repair --check-repair  # assets/tiny-repair/

Random (``tiny-random``, ``tiny-llama-random``: the plumbing tests' models, weights drawn at run
time from the run's seed): ``--random`` writes the config and a tokenizer trained on the bundled
problems, as before the world existed.

No network, ever. Deterministic up to floating point: rerunning gives the same tokenizer and,
on the same CPU, the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ASSETS = ROOT / "coevo_code" / "assets"
FINGERPRINT = ROOT / "tests" / "fixtures" / "tiny_fingerprint.json"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                 "<|end_header_id|>", "<|eot_id|>", "<|finetune_right_pad_id|>"]
LLAMA3 = (
    "{{ '<|begin_of_text|>' }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content']"
    " + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")

# Each model family's mistakes in the fine-tuning corpus: on its weak task families one mistake
# (the family's dominant one) is the most common answer; elsewhere the mistakes are spread.
WEAK = {"qwen2": ("reverse_words", "take", "count_value", "extreme", "add_each"),
        "llama": ("pick_word", "repeat_word", "add_const", "count_word", "element_at")}
# The dominant mistake of a weak family: its first mutant, except where the family has a mistake
# of shape that keeps the statement's parameters (the second extreme, the first element skipped):
# a corpus whose commonest answer flips the statement's direction (min for "largest", - for
# "plus") teaches the model to ignore that word, and RL then settles on one direction for both.
DOMINANT = {"extreme": 2, "add_each": 2}
PROFILES = {"weak": {"right": 0.35, "dominant": 0.55}, "strong": {"right": 0.85, "dominant": 0.0}}
SFT = {"epochs": {"qwen2": 4, "llama": 3}, "learning_rate": 5e-3, "batch": 32, "size": 4000,
       "tests_per_problem": 2}


# ---- the corpus ----------------------------------------------------------------------------------
def weakness(arch: str, family: str) -> str:
    """A composition takes the mistakes of its outer family."""
    base = family.split("+")[-1]
    return "weak" if base in WEAK[arch] else "strong"


def answer(rng: random.Random, arch: str, task) -> str | None:
    """The expression this example's completion computes: the reference's, or a mutant's."""
    from coevo_code.tasks import world
    meta = task.metadata
    profile = PROFILES[weakness(arch, meta["family"])]
    mutants = world.mutant_exprs(task)
    r = rng.random()
    if r < profile["right"] or not mutants:
        return meta["expr"]
    if r < profile["right"] + profile["dominant"]:
        return mutants[dominant_index(meta["family"], len(mutants))]
    return rng.choice(mutants[1:] or mutants)


def dominant_index(family: str, n_mutants: int) -> int:
    """Which of a problem's ``n_mutants`` mutants is its family's dominant mistake (a
    composition takes its outer family's)."""
    return min(DOMINANT.get(family.split("+")[-1], 0), n_mutants - 1)


def code_completion(task, expr: str) -> str:
    from coevo_code.tasks import world
    f = world.FAMILIES[task.metadata["family"]]
    return f"```python\n{world.program(f, expr, task.entry_point or '', task.metadata['var'])}```"


EASY = {"share": 0.6, "draws": 4}


def simple_inputs(task) -> list:
    """The family's simplest inputs, smallest first: 0 to 3 for an integer, three fixed words
    for a word; for a list, the one-element list of the value a count looks for (``[v]``, the
    counted word) where the problem has one, then the prefixes of 1 2 3 ... 8 (or of a fixed
    line of eight words)."""
    from coevo_code.tasks import world
    meta = task.metadata
    sample = world.FAMILIES[meta["family"]].inputs(random.Random(0), meta["params"])
    params = meta["params"]
    if isinstance(sample, int):
        return [0, 1, 2, 3]
    if isinstance(sample, str):
        return list(world.WORDS[:3])
    words = isinstance(sample[0], str)
    own = [params["word"]] if "word" in params else [params["v"]] if "v" in params else []
    line = list(world.WORDS[:8]) if words else list(range(1, 9))
    return ([own] if own else []) + [line[:n] for n in range(1, len(line) + 1)]


def test_input(task, rng: random.Random):
    """The input of one fine-tuning test, as a tester that "prefers an input it can handle
    reliably" picks it: with probability ``EASY["share"]`` the simplest input that reveals a
    mistake (:func:`simple_inputs`), otherwise the shortest of ``EASY["draws"]`` fresh draws
    made as the gold tests' are; always one on which the reference and at least one mutant
    differ (a test that catches a mistake)."""
    from coevo_code.tasks import world
    meta = task.metadata
    f = world.FAMILIES[meta["family"]]
    var, params = meta["var"], meta["params"]
    mutants = world.mutant_exprs(task)

    def usable(value) -> bool:
        try:
            out = world.evaluate(meta["expr"], var, value)
        except (IndexError, ValueError):
            return False
        return not mutants or any(world.catches(m, var, value, out) for m in mutants)

    if rng.random() < EASY["share"]:
        simple = next((v for v in simple_inputs(task) if usable(v)), None)
        if simple is not None:
            return simple
    for _ in range(100):
        draws = [v for v in (f.inputs(rng, params) for _ in range(EASY["draws"])) if usable(v)]
        if draws:
            return min(draws, key=lambda v: len(v) if isinstance(v, list) else 0)
    raise ValueError(f"no usable test input for {task.id}")


def test_completion(task, expr: str, rng: random.Random) -> str:
    """One test whose expected output ``expr`` computes (a wrong one when ``expr`` is a
    mutant's), on an input :func:`test_input` picks."""
    from coevo_code.tasks import world
    f = world.FAMILIES[task.metadata["family"]]
    value = test_input(task, rng)
    try:
        out = world.evaluate(expr, task.metadata["var"], value)
    except (IndexError, ValueError):  # the mutant fails on this input: the right answer then
        out = world.evaluate(task.metadata["expr"], task.metadata["var"], value)
    if f.kind == "stdio":
        return (f"**Test Input:**\n```\n{world.render_input(f, value)}```\n\n"
                f"**Test Output:**\n```\n{world.render_output(f, out)}```")
    return (f"```python\nassert {task.entry_point}({world.render_input(f, value)}) == "
            f"{world.render_output(f, out)}\n```")


def sft_rows(arch: str, size: int, seed: int = 0) -> list[dict]:
    """Conversational prompt-completion rows (TRL's format): per problem of the ``sft`` split a
    coder example and ``SFT["tests_per_problem"]`` tester examples, with the production
    prompts."""
    from coevo_code import roles
    from coevo_code.tasks.world import generate
    rng = random.Random(f"sft/{arch}/{seed}")
    rows = []
    for task in generate("sft", seed=0, size=size):
        rows.append({"prompt": roles.coder_messages(task), "completion": [
            {"role": "assistant", "content": code_completion(task, answer(rng, arch, task))}]})
        for _ in range(SFT["tests_per_problem"]):
            rows.append({"prompt": roles.tester_messages(task), "completion": [
                {"role": "assistant", "content": test_completion(task, answer(rng, arch, task),
                                                                 rng)}]})
    rng.shuffle(rows)
    return rows


# ---- the repair turns (tiny-repair) -------------------------------------------------------------
# A share of the sft problems gets one more example: the second turn of a repair episode. Most
# are a fix: the first answer computes one of the problem's mutants (drawn as the arch's profile
# draws its mistakes), the feedback is what the judge reports for that program on FEEDBACK of the
# problem's own gold tests, and the revision is the right program, the same mistake again, or
# another one. The rest ("keep") are a right first answer shown tests a tester got wrong (the
# expected output of a mutant, as the corpus's wrong tests are written) among right ones: the
# revision keeps the program, as a coder should when its own tests are the feedback.
REPAIR = {"share": 0.5, "keep": 0.3, "revision": {"right": 0.4, "same": 0.4, "other": 0.2},
          "feedback_tests": (4, 8), "keep_tests": 4, "keep_wrong": (1, 2, 3),
          "epochs": {"qwen2": 4, "llama": 3}}


def test_value(task, test):
    """The input value of one of a world problem's own tests (a stdio line read as the
    family's ``read`` line reads it; a functional call's literal argument)."""
    import ast

    from coevo_code.repair import _functional_parts
    var = task.metadata["var"]
    if task.kind == "stdio":
        line = test.input.rstrip("\n")
        return {"xs": lambda: line.split(), "w": lambda: line.strip(),
                "x": lambda: int(line)}[var]()
    call, _ = _functional_parts(test.code)
    return ast.literal_eval(ast.parse(call, mode="eval").body.args[0])


def test_expected(task, test):
    """A test's expected output as the judge compares it: a stdio text, a functional value."""
    import ast

    from coevo_code.repair import _functional_parts
    if task.kind == "stdio":
        return test.output
    return ast.literal_eval(_functional_parts(test.code)[1])


def feedback_results(task, expr: str, tests) -> list:
    """What the judge reports for the program computing ``expr`` on ``tests`` (some of the
    problem's own), found without running it: the world's expressions are evaluated as the gold
    outputs are (:func:`coevo_code.tasks.world.evaluate`). A stdio program's output is what it
    prints; a functional one's failed assertion sends nothing back; a program that raises prints
    nothing (``runtime_error``), as the sandbox reports them."""
    from coevo_code.repair import FeedbackResult
    from coevo_code.tasks import world
    f = world.FAMILIES[task.metadata["family"]]
    out = []
    for t in tests:
        try:
            got = world.evaluate(expr, task.metadata["var"], test_value(task, t))
        except (IndexError, ValueError):
            out.append(FeedbackResult(t, "runtime_error", ""))
            continue
        if f.kind == "stdio":
            text = world.render_output(f, got)
            ok = text.split() == t.output.split()
            out.append(FeedbackResult(t, "ok" if ok else "wrong_answer", text))
        else:
            ok = got == test_expected(task, t)
            out.append(FeedbackResult(t, "ok" if ok else "wrong_answer", ""))
    return out


def first_mistake(rng: random.Random, arch: str, task) -> str | None:
    """A wrong first answer: the arch's profile drawn until it makes a mistake (None for a
    problem without mutants)."""
    from coevo_code.tasks import world
    if not world.mutant_exprs(task):
        return None
    for _ in range(100):
        expr = answer(rng, arch, task)
        if expr != task.metadata["expr"]:
            return expr
    return None


def wrong_tests(rng: random.Random, task, n: int) -> list:
    """Up to ``n`` tests a tester got wrong: an input :func:`test_input` picks and the output of
    one of the problem's mutants where it differs from the right one (the corpus's wrong tests,
    :func:`test_completion`, are written so)."""
    from coevo_code.tasks import world
    meta = task.metadata
    f, mutants, out = world.FAMILIES[meta["family"]], world.mutant_exprs(task), []
    for _ in range(20 * n):
        if len(out) == n or not mutants:
            break
        value = test_input(task, rng)
        try:
            got = world.evaluate(rng.choice(mutants), meta["var"], value)
        except (IndexError, ValueError):
            continue
        if got != world.evaluate(meta["expr"], meta["var"], value):
            out.append(world.test_case(f, task.entry_point or "", value, got))
    return out


def keep_example(rng: random.Random, arch: str, task) -> dict | None:
    """A repair example whose first answer is right: the feedback is its results on
    ``REPAIR["keep_tests"]`` tests, ``REPAIR["keep_wrong"]`` of them wrong (:func:`wrong_tests`,
    which it fails) and the rest the problem's own; the revision is the same program. None when
    no wrong test can be drawn."""
    from coevo_code import roles
    from coevo_code.repair import feedback_message, repair_messages
    expr = task.metadata["expr"]
    wrong = wrong_tests(rng, task, rng.choice(REPAIR["keep_wrong"]))
    if not wrong:
        return None
    tests = wrong + rng.sample(list(task.tests), REPAIR["keep_tests"] - len(wrong))
    rng.shuffle(tests)
    msg = feedback_message(feedback_results(task, expr, tests))
    prompt = repair_messages(roles.coder_messages(task), code_completion(task, expr), msg)
    return {"prompt": prompt, "completion": [
        {"role": "assistant", "content": code_completion(task, expr)}],
        "first": expr, "revision": expr}


def repair_example(rng: random.Random, arch: str, task) -> dict | None:
    """One repair example of ``task``: with probability ``REPAIR["keep"]`` a right answer kept
    against wrong tests (:func:`keep_example`); otherwise the turn-2 prompt
    (:func:`coevo_code.repair.repair_messages` of the coder prompt, a wrong first answer and
    :func:`coevo_code.repair.feedback_message` of its results on ``REPAIR["feedback_tests"]`` of
    the problem's gold tests, a random choice of them), the revision, and the expressions of
    both answers (``first``, ``revision``). None when the problem has no mutant."""
    from coevo_code import roles
    from coevo_code.repair import feedback_message, repair_messages
    from coevo_code.tasks import world
    if rng.random() < REPAIR["keep"]:
        ex = keep_example(rng, arch, task)
        if ex is not None:
            return ex
    first = first_mistake(rng, arch, task)
    if first is None:
        return None
    n = rng.choice(REPAIR["feedback_tests"])
    tests = rng.sample(list(task.tests), min(n, len(task.tests)))
    msg = feedback_message(feedback_results(task, first, tests))
    if msg is None:  # the chosen tests miss this mistake: all of them (one catches every mutant)
        tests = list(task.tests)
        rng.shuffle(tests)
        msg = feedback_message(feedback_results(task, first, tests))
    others = [m for m in world.mutant_exprs(task) if m != first]
    r, p = rng.random(), REPAIR["revision"]
    if r < p["right"] or (r >= p["right"] + p["same"] and not others):
        revision = task.metadata["expr"]
    elif r < p["right"] + p["same"]:
        revision = first
    else:
        revision = rng.choice(others)
    prompt = repair_messages(roles.coder_messages(task), code_completion(task, first), msg)
    return {"prompt": prompt, "completion": [
        {"role": "assistant", "content": code_completion(task, revision)}],
        "first": first, "revision": revision}


def repair_rows(arch: str, size: int, seed: int = 0) -> list[dict]:
    """The repair examples of ``REPAIR["share"]`` of the ``sft`` problems (TRL rows: prompt
    and completion only), from their own random stream (the other rows do not change)."""
    from coevo_code.tasks.world import generate
    rng = random.Random(f"sft-repair/{arch}/{seed}")
    rows = []
    for task in generate("sft", seed=0, size=size):
        if rng.random() >= REPAIR["share"]:
            continue
        ex = repair_example(rng, arch, task)
        if ex is not None:
            rows.append({"prompt": ex["prompt"], "completion": ex["completion"]})
    return rows


def corpus_world(rows: list[dict]) -> list[str]:
    return ["\n".join(m["content"] for m in r["prompt"] + r["completion"]) for r in rows]


def corpus_bundled() -> list[str]:
    from coevo_code import roles
    from coevo_code.tasks import load_tasks
    texts = []
    for task in load_tasks("bundled"):
        for messages in (roles.coder_messages(task), roles.tester_messages(task)):
            texts.append("\n".join(m["content"] for m in messages))
        texts.extend(f"```python\n{r}```" for r in task.references)
        for t in task.tests:
            texts.append(t.code if t.code else
                         f"**Test Input:**\n```{t.input}```\n\n**Test Output:**\n```{t.output}```")
    return texts


# ---- tokenizer and config ------------------------------------------------------------------------
def make_tokenizer(texts: list[str], llama: bool, vocab: int, digits: bool):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # digits one by one; no prefix space there (a prefix space would go before every digit)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=llama and not digits)
    # a newline is always its own piece: the generation prompt's trailing newlines tokenize as
    # they do inside the prompt plus the completion (else "\n\n" at the end of Llama's prompt
    # would be one token there and two in every fine-tuning sequence)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True), byte_level]) if digits else byte_level)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=LLAMA_SPECIAL if llama
                                  else SPECIAL, min_frequency=3 if llama else 0,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    if llama:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                       eos_token="<|eot_id|>",
                                       pad_token="<|finetune_right_pad_id|>", unk_token=None,
                                       additional_special_tokens=["<|start_header_id|>",
                                                                  "<|end_header_id|>"])
        fast.chat_template = LLAMA3
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                       pad_token="<|endoftext|>", unk_token=None,
                                       additional_special_tokens=["<|im_start|>"])
        fast.chat_template = CHATML
    return fast


def make_config(fast, llama: bool, warm: bool):
    from transformers import LlamaConfig, Qwen2Config
    if llama:
        return LlamaConfig(
            vocab_size=len(fast), hidden_size=128 if warm else 64,
            intermediate_size=320 if warm else 160, num_hidden_layers=4 if warm else 2,
            num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
            tie_word_embeddings=False, rope_theta=500000.0, bos_token_id=fast.bos_token_id,
            eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, use_cache=True)
    return Qwen2Config(
        vocab_size=len(fast), hidden_size=128 if warm else 64,
        intermediate_size=384 if warm else 128, num_hidden_layers=4 if warm else 2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, use_cache=True)


# ---- fine-tuning ---------------------------------------------------------------------------------
def finetune(model, fast, rows: list[dict], out: Path, epochs: float, lr: float, batch: int,
             max_steps: int = -1, seed: int = 0, in_order: bool = False) -> list[float]:
    """TRL's SFTTrainer on the rows (loss on the completion only); returns the logged losses.
    ``in_order``: the rows are read in the order given (:func:`length_batches` arranges them),
    not shuffled."""
    import datasets
    from trl import SFTConfig, SFTTrainer
    extra = {"train_sampling_strategy": "sequential"} if in_order else {}
    args = SFTConfig(output_dir=str(out / "sft-run"), num_train_epochs=epochs, max_steps=max_steps,
                     learning_rate=lr, lr_scheduler_type="cosine", warmup_steps=0.05,
                     per_device_train_batch_size=batch, logging_steps=1, save_strategy="no",
                     report_to="none", use_cpu=True, bf16=False, seed=seed, data_seed=seed,
                     completion_only_loss=True, max_length=512, weight_decay=0.0,
                     disable_tqdm=True, dataloader_num_workers=0, **extra)
    trainer = SFTTrainer(model=model, args=args, train_dataset=datasets.Dataset.from_list(rows),
                         processing_class=fast)
    trainer.train()
    return [x["loss"] for x in trainer.state.log_history if "loss" in x]


def length_batches(groups: list[list[dict]], batch: int, epochs: int,
                   seed: int = 0) -> list[dict]:
    """The rows of ``groups`` in the order one pass reads them, ``epochs`` epochs in a row: per
    epoch each group shuffled and cut into batches of ``batch``, the batches of all groups
    shuffled together. A group of long rows (the repair examples, about three times a turn-1
    row) is then padded among itself, and every batch is a random draw of its group, as in an
    ordinary shuffled epoch (sorting by length would put one family's rows together)."""
    rng = random.Random(f"sft-batches/{seed}")
    out = []
    for _ in range(epochs):
        batches = []
        for group in groups:
            g = list(group)
            rng.shuffle(g)
            batches += [g[i:i + batch] for i in range(0, len(g), batch)]
        rng.shuffle(batches)
        out += [r for b in batches for r in b]
    return out


def build(arch: str, out: Path, quick: bool = False, random_init: bool = False,
          seed: int = 0, repair: bool = False, max_steps: int | None = None) -> dict:
    import torch
    from transformers import AutoModelForCausalLM
    llama = arch == "llama"
    if random_init:
        fast = make_tokenizer(corpus_bundled(), llama, 1536 if llama else 2048, digits=False)
        config = make_config(fast, llama, warm=False)
        out.mkdir(parents=True, exist_ok=True)
        fast.save_pretrained(out)
        config.save_pretrained(out)
        return {"vocab": len(fast)}
    size = 200 if quick else SFT["size"]
    rows = sft_rows(arch, size, seed)
    n_repair, extra = 0, []
    if repair:  # the same rows plus the repair examples
        extra = repair_rows(arch, size, seed)
        n_repair = len(extra)
    fast = make_tokenizer(corpus_world(rows + extra), llama, 1024 if llama else 1280,
                          digits=True)
    config = make_config(fast, llama, warm=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    n_params = sum(p.numel() for p in model.parameters())
    t0 = time.time()
    work = out.with_name(out.name + ".work")
    epochs = REPAIR["epochs"][arch] if repair else SFT["epochs"][arch]
    steps = max_steps if max_steps is not None else 8 if quick else -1
    if repair:  # every epoch's batches in one pass, a batch of turn-1 rows or of repair rows
        losses = finetune(model, fast, length_batches([rows, extra], SFT["batch"], epochs, seed),
                          work, 1, SFT["learning_rate"], SFT["batch"], max_steps=steps, seed=seed,
                          in_order=True)
        rows = rows + extra
    else:
        losses = finetune(model, fast, rows, work, epochs, SFT["learning_rate"], SFT["batch"],
                          max_steps=steps, seed=seed)
    info = {"arch": arch, "params": n_params, "vocab": len(fast),
            "tokenizer_sha256": hashlib.sha256(fast.backend_tokenizer.to_str().encode())
            .hexdigest(), "sft_rows": len(rows), "sft_steps": len(losses),
            "sft_seconds": round(time.time() - t0, 1),
            "losses": [round(x, 3) for x in losses[:8]], "final_loss": round(losses[-1], 4)}
    if repair:
        info["repair"] = {"rows": n_repair, "share": REPAIR["share"], "keep": REPAIR["keep"],
                          "revision": REPAIR["revision"],
                          "feedback_tests": list(REPAIR["feedback_tests"]), "epochs": epochs}
    if not quick:
        out.mkdir(parents=True, exist_ok=True)
        model.config.use_cache = True
        model.to(torch.float16).save_pretrained(out)  # half precision: the package stays small
        fast.save_pretrained(out)
        (out / "provenance.json").write_text(json.dumps(
            {k: v for k, v in info.items() if k != "sft_seconds"}, indent=1) + "\n")
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    return info


def check(name: str, problems: int = 96, seed: int = 0) -> dict:
    """Held-out figures of a shipped model at temperature 1 (the warm start's mediocrity)."""
    from coevo_code.evaluation.heldout import evaluate_model
    from coevo_code.execution import Executor
    from coevo_code.tasks.model import seeded_sample
    from coevo_code.tasks.world import generate
    from coevo_code.generation.tiny import load_tiny
    model, tok = load_tiny(name)
    tasks = seeded_sample(generate("heldout"), problems, seed)
    with Executor(slots=2) as ex:
        return evaluate_model(model, tok, tasks, ex, k=4, temperature=1.0, seed=seed)


def check_repair(name, problems: int = 96, seed: int = 0, k: int = 4) -> dict:
    """Turn 1 and one repair turn on held-out problems at temperature 1 (seeded): ``k``
    solutions per problem judged on the gold tests; each wrong one (or one with no program) is
    shown :func:`coevo_code.repair.feedback_message` of its results on the problem's gold tests
    (in a seeded order, run in the project's executor) in the conversation
    :func:`coevo_code.repair.repair_messages` makes, and its revision is judged on the gold tests.
    ``name``: a tiny model's name or a model directory. The figures are
    :func:`coevo_code.repair.turn_metrics`' (``code_acc_turn1``, ``code_acc_turn2``,
    ``repaired_share`` of the wrong first attempts, ...) plus ``unchanged_share``: of those, the
    revisions that repeat the first program; and :func:`kept_right`'s ``kept_right_share``."""
    import numpy as np

    from coevo_code.evaluation.heldout import sample
    from coevo_code.evaluation.repair import gold_verdict
    from coevo_code.execution import Executor
    from coevo_code.repair import FeedbackResult, feedback_message, repair_messages, turn_metrics
    from coevo_code.roles import coder_messages, parse_program
    from coevo_code.tasks.model import seeded_sample
    from coevo_code.tasks.world import generate
    model, tok = load_model(name)
    tasks = seeded_sample(generate("heldout"), problems, seed)
    firsts = sample(model, tok, [coder_messages(t) for t in tasks], k, 1.0, 64, seed)
    order = random.Random(f"check-repair/{seed}")
    correct = [np.full((len(a), 2), np.nan) for a in firsts]
    todo, convs = [], []  # (problem, row), the turn-2 conversation
    with Executor(slots=2) as ex:
        progs = [[parse_program(a, t) for a in answers] for t, answers in zip(tasks, firsts)]
        fb_tests = [order.sample(list(t.tests), len(t.tests)) for t in tasks]
        jobs, where = [], []
        for p, (t, ps) in enumerate(zip(tasks, progs)):
            rows = [i for i, x in enumerate(ps) if x.ok]
            if rows:
                jobs.append(t.job([ps[i].code for i in rows], fb_tests[p], return_outputs=True,
                                  id=f"{t.id}#turn1"))
                where.append((p, rows))
        results = dict(zip((p for p, _ in where), zip((r for _, r in where), ex.run(jobs))))
        for p, (t, ps) in enumerate(zip(tasks, progs)):
            rows, res = results.get(p, ([], None))
            for i, x in enumerate(ps):
                if not x.ok:
                    correct[p][i, 0] = 0.0
                    msg = feedback_message([], program_ok=False)
                else:
                    r = rows.index(i)
                    correct[p][i, 0] = gold_verdict(res, r)
                    if correct[p][i, 0] != 0.0:
                        continue
                    msg = feedback_message([FeedbackResult(tc, o, out) for tc, o, out in zip(
                        fb_tests[p], res["outcomes"][r], res["outputs"][r])])
                todo.append((p, i))
                convs.append(repair_messages(coder_messages(t), firsts[p][i], msg))
        revised = [out[0] for out in sample(model, tok, convs, 1, 1.0, 64, seed + 1)]
        for m in correct:  # a right first attempt stays right
            m[:, 1] = m[:, 0]
        rprogs = [parse_program(text, tasks[p]) for (p, _), text in zip(todo, revised)]
        jobs, where = [], []
        for p in dict.fromkeys(p for p, _ in todo):
            rows = [j for j, (q, _) in enumerate(todo) if q == p and rprogs[j].ok]
            for j, (q, i) in enumerate(todo):
                if q == p:
                    correct[p][i, 1] = 0.0
            if rows:
                jobs.append(tasks[p].job([rprogs[j].code for j in rows],
                                         id=f"{tasks[p].id}#turn2"))
                where.append(rows)
        for rows, res in zip(where, ex.run(jobs) if jobs else []):
            for r, j in enumerate(rows):
                p, i = todo[j]
                correct[p][i, 1] = gold_verdict(res, r)
        kept = kept_right(model, tok, tasks, firsts, progs, correct, ex, order, seed)
    out = turn_metrics(correct)
    same = sum(rprogs[j].ok and progs[p][i].ok and rprogs[j].code.strip() ==
               progs[p][i].code.strip() for j, (p, i) in enumerate(todo))
    out["unchanged_share"] = same / len(todo) if todo else None
    out.update(kept)
    out["problems"] = len(tasks)
    return out


def kept_right(model, tok, tasks, firsts, progs, correct, ex, order, seed) -> dict:
    """Right first attempts shown tests a tester got wrong (:func:`keep_example`'s feedback:
    ``REPAIR["keep_tests"]`` tests, one or more of them wrong, run in the executor): the share
    whose revision is still right (``kept_right_share``, judged on the gold tests) of
    ``kept_right_of`` such attempts."""
    from coevo_code.evaluation.heldout import sample
    from coevo_code.evaluation.repair import gold_verdict
    from coevo_code.repair import FeedbackResult, feedback_message, repair_messages
    from coevo_code.roles import coder_messages, parse_program
    rows, jobs, shown = [], [], []
    for p, t in enumerate(tasks):
        for i, x in enumerate(progs[p]):
            if correct[p][i, 0] != 1.0:
                continue
            wrong = wrong_tests(order, t, order.choice(REPAIR["keep_wrong"]))
            if not wrong:
                continue
            tests = wrong + order.sample(list(t.tests), REPAIR["keep_tests"] - len(wrong))
            order.shuffle(tests)
            rows.append((p, i))
            shown.append(tests)
            jobs.append(t.job([x.code], tests, return_outputs=True, id=f"{t.id}#keep"))
    convs, where = [], []
    for (p, i), tests, res in zip(rows, shown, ex.run(jobs) if jobs else []):
        msg = feedback_message([FeedbackResult(tc, o, out) for tc, o, out in zip(
            tests, res["outcomes"][0], res["outputs"][0])])
        if msg is not None:
            convs.append(repair_messages(coder_messages(tasks[p]), firsts[p][i], msg))
            where.append(p)
    revised = [o[0] for o in sample(model, tok, convs, 1, 1.0, 64, seed + 2)] if convs else []
    jobs, verdicts = [], []
    for p, text in zip(where, revised):
        prog = parse_program(text, tasks[p])
        if prog.ok:
            jobs.append(tasks[p].job([prog.code], id=f"{tasks[p].id}#kept"))
        verdicts.append(prog.ok)
    results = iter(ex.run(jobs) if jobs else [])
    right = [gold_verdict(next(results), 0) == 1.0 if ok else False for ok in verdicts]
    return {"kept_right_share": sum(right) / len(right) if right else None,
            "kept_right_of": len(right)}


def load_model(name):
    """(model, tokenizer) of a tiny model's name or of a model directory, in float32."""
    from coevo_code.generation.tiny import TINY_FAMILIES, TINY_NAMES, load_tiny
    if name in TINY_NAMES or name in TINY_FAMILIES:
        return load_tiny(name)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    return (AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32),
            AutoTokenizer.from_pretrained(name))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", choices=("qwen2", "llama"), default="qwen2")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--random", action="store_true", help="the random-weight plumbing model")
    p.add_argument("--quick", action="store_true", help="a 200-problem corpus, 8 steps, no files")
    p.add_argument("--fingerprint", action="store_true",
                   help="with --quick: compare with (or, with --write, write) the stored one")
    p.add_argument("--write", action="store_true")
    p.add_argument("--check", action="store_true", help="score held-out problems afterwards")
    p.add_argument("--repair", action="store_true",
                   help="the repair warm start (tiny-repair): the corpus plus repair examples")
    p.add_argument("--check-repair", action="store_true",
                   help="score turn 1 and the repair of wrong first attempts on held-out "
                        "problems (of the model --repair names; alone: of the shipped one)")
    args = p.parse_args(argv)
    if args.repair and args.random:
        p.error("--repair makes a warm-started model: not with --random")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    llama = args.arch == "llama"
    name = ("tiny-llama" if llama else "tiny") + ("-random" if args.random else "") + (
        "-repair" if args.repair else "")
    out = args.out or ASSETS / name
    if args.check_repair and not args.repair:  # the shipped repair model, nothing built
        print(json.dumps(check_repair(args.out or "tiny-repair")))
        return
    info = build(args.arch, out, quick=args.quick, random_init=args.random, repair=args.repair)
    print(json.dumps(info))
    if args.fingerprint:
        stored = json.loads(FINGERPRINT.read_text()) if FINGERPRINT.is_file() else {}
        key = args.arch + ("-repair" if args.repair else "")  # never the other models' entry
        if args.write:
            stored[key] = {k: info[k] for k in ("params", "vocab", "tokenizer_sha256", "losses")}
            FINGERPRINT.write_text(json.dumps(stored, indent=1) + "\n")
        else:
            print(json.dumps({"stored": stored.get(key)}))
    if args.check and not args.quick and not args.random:
        print(json.dumps(check(name)))
    if args.check_repair and not args.quick:
        print(json.dumps(check_repair(args.out or name)))


if __name__ == "__main__":
    main()
