"""A policy trained by TRL's GRPOTrainer with a frozen tester as its reward model (no gold labels):
the tester writes unit tests for each problem once, each solution's reward is the share of them it
passes (coevo_code.TesterReward).

    python examples/train_with_tester_reward.py --config configs/tester-reward-tiny.yaml
    python examples/train_with_tester_reward.py --config configs/tester-reward-tiny.yaml \\
        --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --tester_model runs/cure/final --use_cpu false

Fields: TRL's GRPOConfig and ModelConfig, plus `tester_model` (a path, hub id or `tiny`; `gold`:
the problems' gold tests instead, the labelled upper bound), `tester_k` (tests per problem; with
`gold`, the first `tester_k` gold tests, so both rewards judge on as many tests),
`tasks`/`tasks_path`/`tasks_split`/`tasks_limit`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")


@dataclass
class TesterArgs:
    tester_model: str = field(default="tiny", metadata={
        "help": "the frozen tester (gold: the problems' gold tests, the upper bound)"})
    tester_k: int = field(default=4, metadata={"help": "tests the tester writes per problem"})
    tester_max_tokens: int = field(default=256, metadata={"help": "tester completion length"})
    tasks: str = field(default="bundled", metadata={"help": "problems (a dataset name)"})
    tasks_path: str | None = field(default=None, metadata={"help": "local file of the problems"})
    tasks_split: str | None = field(default=None, metadata={"help": "split"})
    tasks_limit: int | None = field(default=None, metadata={"help": "use this many problems"})
    torch_threads: int | None = field(default=1, metadata={"help": "torch threads (CPU)"})
    exec_backend: str = field(default="local", metadata={
        "help": "where the solutions run: local slots or a Ray cluster (ray)"})
    exec_address: str | None = field(default=None, metadata={"help": "ray: the cluster address"})


def main(argv=None) -> int:
    import datasets
    import torch
    from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser, get_peft_config

    from coevo_code import TesterReward
    from coevo_code.generation.engines import Sampling, TransformersEngine
    from coevo_code.generation.tiny import is_tiny, save_tiny
    from coevo_code.tasks import load_tasks
    from coevo_code.training.tester_reward import coder_rows

    targs, config, margs = TrlParser((TesterArgs, GRPOConfig, ModelConfig)).parse_args_and_config(
        argv)
    if targs.torch_threads:
        torch.set_num_threads(targs.torch_threads)
    tasks = list(load_tasks(targs.tasks, targs.tasks_path,
                            **({"split": targs.tasks_split} if targs.tasks_split else {})))
    tasks = tasks[:targs.tasks_limit] if targs.tasks_limit else tasks
    model = margs.model_name_or_path
    if is_tiny(model):
        model = str(save_tiny(Path(config.output_dir) / "initial-model", seed=config.seed,
                              name=model))
        config.model_init_kwargs = {"dtype": "float32"}
    executor_options = {"backend": targs.exec_backend, "address": targs.exec_address}
    if targs.tester_model == "gold":
        reward = TesterReward.from_gold(tasks, max_tests=targs.tester_k,  # as many as a tester's
                                        executor_options=executor_options)
    else:
        tester = TransformersEngine(targs.tester_model, Sampling(
            max_tokens=targs.tester_max_tokens, seed=config.seed))
        reward = TesterReward(tasks, tester, k_tests=targs.tester_k,
                              cache_path=Path(config.output_dir) / "tester_tests.jsonl",
                              executor_options=executor_options)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config,
                          train_dataset=datasets.Dataset.from_list(coder_rows(tasks)),
                          peft_config=get_peft_config(margs))
    try:
        trainer.train()
        trainer.save_model(str(Path(config.output_dir) / "final"))
    finally:
        reward.close()
    print(f"tester reward: {reward.calls} calls, tests for {len(reward.tests)} problems, "
          f"{sum(len(v) for v in reward.tests.values())} parsed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
