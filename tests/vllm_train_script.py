"""Launched by tests/test_vllm.py (one vLLM engine per process: vLLM's distributed state lives
for the life of the process): a short run of the default tiny model with ``use_vllm`` colocated,
no held-out evaluation. Prints one JSON line: the metrics lines, and the error when the run
stopped.

``python vllm_train_script.py OUT MODE [STEPS]``; MODE:
- ``colocate``: as configured;
- ``lora``: with a LoRA adapter (TRL's ModelConfig ``use_peft``);
- ``skip:N``: the N-th weight sync pushes nothing (a sync bug on purpose);
- ``untied``: the tied LM head is not processed again after the reload (the bug the sync fixes).
"""

import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main(out: str, mode: str, steps: int) -> None:
    import yaml
    from trl import ModelConfig

    from coevo_code.training import vllm_sync
    from coevo_code.training.cli import TINY_YAML
    from coevo_code.training.config import CoevoConfig
    from coevo_code.training.run import train

    base = yaml.safe_load(TINY_YAML.read_text())
    base.update(output_dir=out, max_steps=steps, eval_tasks=None, eval_on_start=False,
                save_strategy="no", torch_threads=1, exec_slots=1, disable_tqdm=True,
                problems_per_generation=4, per_device_train_batch_size=32,
                max_completion_length=48, use_vllm=True, vllm_mode="colocate")
    model = ModelConfig(model_name_or_path="tiny")
    if mode == "lora":
        model = ModelConfig(model_name_or_path="tiny", use_peft=True, lora_r=8, lora_alpha=16,
                            lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
        base.update(learning_rate=5e-3)  # adapters start at zero: a rate that moves them
    paths = []
    if mode.startswith("skip:"):
        n, real = int(mode.split(":")[1]), vllm_sync.push_weights

        def push(generation):
            paths.append("skipped" if len(paths) + 1 == n else real(generation))
            return paths[-1]
        vllm_sync.push_weights = push
    elif mode == "untied":
        vllm_sync.reprocess_tied = lambda model: []
    error = None
    try:
        train(CoevoConfig(**base), model)
    except vllm_sync.WeightSyncError as e:
        error = str(e)
    lines = [json.loads(x) for x in open(os.path.join(out, "metrics.jsonl"))] \
        if os.path.exists(os.path.join(out, "metrics.jsonl")) else []
    print("RESULT " + json.dumps({"lines": lines, "error": error, "paths": paths}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2)
