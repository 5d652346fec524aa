"""The model card of a run directory (``README.md``, and ``final/README.md``): the base model, the
method with its papers, the data, the last metrics and how to load the weights.

:func:`render` is pure (plain values in, markdown out); the Method paragraph is the label
source's record (:class:`coevo_code.labels.LabelSource`); the trainer writes it where TRL writes its
own template (``create_model_card``, called with every checkpoint) and beside the final weights.
"""

from __future__ import annotations

from ..labels import label_source as _label_source

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
    method = _label_source(label_source).method  # every registered source has its text
    lines = [
        "---", f"base_model: {base_model}", "library_name: transformers",
        "tags: [coevo-code, grpo, trl, code-generation, unit-test-generation]", "---", "",
        f"# {name}" + (f" (agent {agent})" if agent else ""), "",
        f"Trained with coevo-code from **{base_model}** for {step} optimiser steps.", "",
        "## Method", "", method, "",
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
