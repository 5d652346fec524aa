"""Launched by tests/test_training_resume.py: a 6-step run on scripted completions (whose
choices draw from torch's RNG, so a resume that lost the RNG state would train differently),
saving every step; ``--resume`` continues it."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from training_helpers import PLUMBING, bundled, scripted_rollout, tiny_config

from coevo_code.training import train


def main(out: str, resume: bool) -> None:
    import torch
    torch.set_num_threads(1)
    tasks = bundled(6)
    cfg = tiny_config(out, max_steps=6, save_strategy="steps", save_steps=1,
                      problems_per_generation=3, per_device_train_batch_size=24)
    train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4, random_variant=True),
          resume=resume)


if __name__ == "__main__":
    main(sys.argv[1], "--resume" in sys.argv[2:])
