"""One agent of a scripted pair or ring, launched by tests/test_pair.py (one process per agent,
the real TCPStore exchange): trains on scripted completions and writes, per step, what its reward
call saw. One agent plants a wrong answer that all its solutions and tests agree on at one step,
so the test can see which agents' rewards it moves."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from training_helpers import (GARBAGE, bundled, gold_test_text, scripted_rollout,
                              tiny_config, wrong_program, wrong_test)

PLANTER, PLANT_STEP = "llama", 2  # llama's generation at global step 2 (the 3rd step)


def plan(agent, task, role, j, step):
    if agent == PLANTER and step == PLANT_STEP and task.kind == "stdio":
        if role == "code":
            return "```python\nprint('wrong')\n```"
        g = task.tests[j % len(task.tests)]
        return f"**Test Input:**\n```\n{g.input}```\n\n**Test Output:**\n```\nwrong\n```"
    ref = f"```python\n{task.references[0]}```"
    bad = f"```python\n{wrong_program(task)}```"
    if role == "code":
        return ([ref, ref, ref, bad] if agent == PLANTER else [ref, ref, bad, GARBAGE])[j % 4]
    ts = task.tests
    if agent == PLANTER:
        return [gold_test_text(task, ts[0]), gold_test_text(task, ts[-1]), gold_test_text(task, ts[1 % len(ts)]),
                wrong_test(task)][j % 4]
    return [gold_test_text(task, ts[-1]), wrong_test(task), GARBAGE, gold_test_text(task, ts[0])][j % 4]


def rollout_for(agent, tasks, k):
    def choose(ti, role, j, trainer):
        return plan(agent, tasks[ti], role, j, trainer.state.global_step)
    return scripted_rollout(tasks, k, choose=choose)


def main(out, agent, names, source, model, steps):
    import torch
    from trl import ModelConfig

    from coevo_code.training import train
    from coevo_code.training.run import end_worker
    from coevo_code.training.step import CoevoStep
    torch.set_num_threads(1)
    CoevoStep.KEEP_CALLS = 1000
    tasks = bundled()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    cfg = tiny_config(os.path.join(out, agent), max_steps=steps, problems_per_generation=4,
                      per_device_train_batch_size=32 // world, label_source=source,
                      agent_name=agent,
                      agent_names=names, exchange_timeout_s=120, exec_slots=1)
    res = train(cfg, ModelConfig(model_name_or_path=model), tasks=tasks,
                rollout_func=rollout_for(agent, tasks, 4))
    calls = [{"rows": rows, "rewards": rewards}
             for mode, rows, rewards in res.trainer.coevo.calls if mode == "train"]
    name = f"{agent}.calls.json" if rank == 0 else f"{agent}.rank{rank}.calls.json"
    with open(os.path.join(out, name), "w") as f:
        json.dump({"steps": res.global_step, "calls": calls,
                   "tasks": [t.id for t in tasks]}, f)
    end_worker()


if __name__ == "__main__":
    out, agent, names, source, model, steps = sys.argv[1:7]
    main(out, agent, names.split(","), source, model, int(steps))
