"""The model card of a run directory (``README.md``, and ``final/README.md``): the base model, the
method with its papers, the data, the last metrics and how to load the weights.

:func:`render` is pure (plain values in, markdown out); the trainer writes it where TRL writes its
own template (``create_model_card``, called with every checkpoint) and beside the final weights.
"""

from __future__ import annotations

CURE = ("CURE (Wang et al., *Co-Evolving LLM Coder and Unit Tester via Reinforcement Learning*, "
        "[arXiv:2506.03136](https://arxiv.org/abs/2506.03136))")
SRT = ("SRT (Shafayat et al., [arXiv:2505.21444](https://arxiv.org/abs/2505.21444)) / TTRL (Zuo "
       "et al., [arXiv:2504.16084](https://arxiv.org/abs/2504.16084))")
METHODS = {
    "gold": f"{CURE}: one policy writes k solutions and k unit tests per problem; a solution is "
            "rewarded by the share of gold tests it passes, a test by CURE's estimated mu "
            "(Eq. 4: credit for being right and for catching wrong solutions); GRPO (TRL).",
    "partner": "Co-RL, label-free, with a partner of another model family: this agent's solutions "
               "are judged by the partner's tests that the partner's own execution-majority vote "
               f"accepts, its tests by the partner's solutions (CURE's test reward, {CURE}); no "
               "gold test or reference solution enters a reward; GRPO (TRL).",
    "ring": "Co-RL, label-free, in a ring of agents: each agent is labelled by its predecessor's "
            "tests and vote, as with a partner; no gold test enters a reward; GRPO (TRL).",
    "self_majority": f"Self-rewarding by majority vote, {SRT}: each solution is rewarded 1 when it "
                     "is in the largest cluster of the model's own solutions by their outputs; "
                     "no gold test enters a reward; GRPO (TRL).",
    "frozen": "Label-free with a frozen labeller (SRT's stabiliser): a fixed model's stored tests "
              "and vote label every problem; no gold test enters a reward; GRPO (TRL).",
}
SHOWN = ("code_acc", "code_acc_greedy", "pass_at_4", "ut_acc", "bon_acc", "p01", "p00")


def _fmt(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _table(row: dict | None, keys) -> list[str]:
    got = [(k, row[k]) for k in keys if row and row.get(k) is not None]
    if not got:
        return ["(none recorded)"]
    return ["| " + " | ".join(k for k, _ in got) + " |",
            "| " + " | ".join("---" for _ in got) + " |",
            "| " + " | ".join(_fmt(v) for _, v in got) + " |"]


def render(*, name: str, base_model: str, label_source: str, data: str, step: int,
           eval_data: str | None = None, last_step: dict | None = None,
           first_eval: dict | None = None, last_eval: dict | None = None,
           agent: str | None = None, weights: str = "final") -> str:
    """The card. ``last_step``: the last line of ``metrics.jsonl``; ``first_eval`` /
    ``last_eval``: the first and last lines of ``eval.jsonl`` (None: not recorded)."""
    if label_source not in METHODS:
        raise ValueError(f"label_source must be one of {', '.join(METHODS)}, got "
                         f"{label_source!r}")
    lines = [
        "---", f"base_model: {base_model}", "library_name: transformers",
        "tags: [coevo-code, grpo, trl, code-generation, unit-test-generation]", "---", "",
        f"# {name}" + (f" (agent {agent})" if agent else ""), "",
        f"Trained with coevo-code from **{base_model}** for {step} optimiser steps.", "",
        "## Method", "", METHODS[label_source], "",
        "## Data", "", f"- training problems: {data}",
    ]
    if eval_data:
        lines.append(f"- held-out evaluation: {eval_data}")
    lines += ["", "## Metrics", "", f"Last training step ({(last_step or {}).get('step', '-')}), "
              "from `metrics.jsonl`:", "", *_table(last_step, ("code_acc", "ut_acc", "bon_acc",
                                                                "p01", "p00", "mu")), ""]
    if first_eval or last_eval:
        for title, row in (("before training", first_eval), ("last evaluation", last_eval)):
            lines += [f"Held-out, {title} (step {(row or {}).get('step', '-')}, "
                      "`eval.jsonl`):", "", *_table(row, SHOWN), ""]
    lines += ["## Use", "", "```python",
              "from transformers import AutoModelForCausalLM, AutoTokenizer",
              f'model = AutoModelForCausalLM.from_pretrained("{weights}")',
              f'tokenizer = AutoTokenizer.from_pretrained("{weights}")', "```", "",
              "Prompts: `coevo_code.roles.coder_messages(task)` and `tester_messages(task)` with "
              "the tokenizer's chat template; `coevo eval --model PATH` scores it on a benchmark.",
              ""]
    return "\n".join(lines)
