"""Launched by tests/test_training_dist.py under ``torchrun --nproc_per_node 2`` (CPU, gloo):
trains 2 steps on scripted completions and writes what each process's reward call saw; with a
third argument (a Ray cluster's address), every process executes on that cluster."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from training_helpers import PLUMBING, bundled, scripted_rollout, tiny_config

from coevo_code.training import train
from coevo_code.training.run import end_worker


def main(out: str, mode: str, ray_address: str | None = None) -> None:
    import torch
    torch.set_num_threads(1)
    tasks = bundled(6)
    if mode == "local":   # 4 problems x 8 rows = 32; 16 per process = 2 whole problems each
        over = dict(problems_per_generation=4, per_device_train_batch_size=16)
    else:                 # 3 problems x 8 rows = 24; 12 per process splits a problem
        over = dict(problems_per_generation=3, per_device_train_batch_size=12)
    if ray_address:  # every process scores through the same Ray pool
        over.update(exec_backend="ray", exec_address=ray_address)
    cfg = tiny_config(out, max_steps=2, **over)
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    rank = int(os.environ["RANK"])
    step = res.trainer.coevo
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": res.trainer.accelerator.num_processes,
                   "local_ok": step.sharding.local_ok("train"), "steps": res.global_step,
                   "calls": [[m, rows, rewards] for m, rows, rewards in step.calls],
                   "metrics": step.last.metrics}, f)
    end_worker()


if __name__ == "__main__":
    main(*sys.argv[1:4])
