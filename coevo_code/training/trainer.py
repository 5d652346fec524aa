"""``CoevoTrainer``: TRL's ``GRPOTrainer`` with the paired sampler, the no-signal rows dropped,
phase timing, and one metrics line per optimiser step. Everything else is TRL's.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict, deque
from pathlib import Path

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback
from trl import GRPOTrainer

from ..evaluation.heldout import EVAL_KEYS
from .data import EvalSampler, PairedSampler
from .reward import CoevoReward
from .rundir import JsonlWriter
from .scoring import MATRIX_KEYS, METRIC_KEYS

PHASES = ("generation", "execution", "rewards", "update")
TRL_KEYS = ("loss", "grad_norm", "learning_rate", "entropy", "kl")
STEP_KEYS = (("step", "epoch", "generation", "wall_s") + METRIC_KEYS
             + tuple(f"time_{p}" for p in PHASES) + ("time_exchange", "time_step") + TRL_KEYS
             + ("curriculum_skipped",) + MATRIX_KEYS)
STATE_FILE = "coevo_state.json"  # in each checkpoint: curriculum estimates, early-stopping record


class _StepEnd(TrainerCallback):
    def __init__(self, trainer: "CoevoTrainer"):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer._on_step_end(state)
        if self.trainer.coevo_reward.stop_all:  # early stopping, agreed by every agent
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        self.trainer._flush()


class _Progress(ProgressCallback):
    """The progress bar, with the step's key figures as its postfix instead of a printed dict
    per step (everything is in metrics.jsonl and wherever ``report_to`` points)."""

    SHOW = (("coevo/code_acc", "code"), ("coevo/ut_acc", "ut"), ("coevo/bon_acc", "bon"),
            ("coevo/parse_fail_code", "unparsed"), ("loss", "loss"))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            if any(k.startswith("train_") for k in logs):
                return
            post = {short: f"{logs[k]:.3g}" for k, short in self.SHOW
                    if isinstance(logs.get(k), (int, float))}
            pooled = {k[len("eval_pooled/"):]: v for k, v in logs.items()
                      if k.startswith("eval_pooled/") and isinstance(v, (int, float))}
            if pooled:
                self.training_bar.write(f"eval at step {state.global_step}: " + ", ".join(
                    f"{k}={v:.3g}" for k, v in pooled.items()
                    if k in ("code_acc", "code_acc_greedy", "ut_acc", "bon_acc")))
            elif not any(k.startswith("eval_") for k in logs) and post:
                self.training_bar.set_postfix(post, refresh=False)


class CoevoTrainer(GRPOTrainer):
    """``GRPOTrainer(model, reward_funcs=[CoevoReward], args=CoevoConfig, ...)``.

    - ``_get_train_sampler``: :class:`PairedSampler` (k code rows then k test rows per problem);
    - ``_generate_and_score_completions``: rows the reward callable left without a reward (the
      tests of a problem no solution solves; code rows of a problem with no gold test) get zero
      advantage *and* are masked out of the loss, as CURE drops them from its batch;
    - phase times: generation (``_generate``), execution and rewards (the reward callable), update
      (the rest of the optimiser step: log-probabilities, loss, backward, optimiser);
    - ``metrics.jsonl`` / ``eval.jsonl`` in the output directory (main process).
    """

    def __init__(self, *args, coevo_reward: CoevoReward, n_train: int, n_eval: int = 0,
                 write_metrics: bool = True, **kwargs):
        self.coevo_reward = coevo_reward
        self._n_train, self._n_eval = n_train, n_eval
        super().__init__(*args, reward_funcs=[coevo_reward], **kwargs)
        coevo_reward.bind(self.accelerator)
        out = Path(self.args.output_dir)
        self._writer = JsonlWriter(out / "metrics.jsonl", STEP_KEYS) if write_metrics else None
        self._eval_writer = JsonlWriter(out / "eval.jsonl", EVAL_KEYS) if write_metrics else None
        self._phase = defaultdict(float)
        self._step_time = 0.0
        self._generations = 0
        self._last_gen: dict = {}
        self._pending: dict | None = None
        self._t0 = time.time()
        self.batches: deque = deque(maxlen=4)
        self.best: dict = {"code_acc": None, "step": None, "evals_since": 0}
        self.add_callback(_StepEnd(self))
        if any(isinstance(c, ProgressCallback) for c in self.callback_handler.callbacks):
            self.remove_callback(ProgressCallback)
            self.add_callback(_Progress())

    # ---- data order -----------------------------------------------------------------------------
    def _get_train_sampler(self, dataset=None):
        a = self.args
        return PairedSampler(
            n_problems=self._n_train, k=self.num_generations,
            problems_per_batch=a.problems_per_batch,
            batches=a.generation_batches(self._n_train, a.gradient_accumulation_steps),
            repeat=self.num_iterations * a.steps_per_generation, seed=a.seed,
            shuffle=self.shuffle_dataset, p_give_example=a.p_give_example,
            keep=self.coevo_reward.curriculum.keep if a.curriculum else None)

    def _get_eval_sampler(self, eval_dataset):
        return EvalSampler(self._n_eval, self.num_generations_eval)

    # ---- generation, rewards, masking -------------------------------------------------------------
    def _generate(self, prompts):
        t = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            if self.model.training:
                self._phase["generation"] += time.perf_counter() - t

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        last = self.coevo_reward.last
        no_reward = last.get("no_reward") or [False] * out["advantages"].shape[0]
        drop = torch.tensor(no_reward, dtype=torch.bool, device=out["completion_mask"].device)
        if drop.any():
            out["completion_mask"] = out["completion_mask"].masked_fill(drop.unsqueeze(1), 0)
            out["advantages"] = out["advantages"].masked_fill(drop, 0.0)
        mask = out["completion_mask"] if out.get("tool_mask") is None else \
            out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        self.batches.append({"dropped": drop.tolist(), "advantages": out["advantages"].tolist(),
                             "tokens": mask.sum(dim=1).tolist()})  # local rows, for inspection
        if self.model.training:
            self._generations += 1
            for p in ("execution", "rewards", "exchange"):
                self._phase[p] += last.get("phases", {}).get(p, 0.0)
            self._last_gen = dict(last.get("metrics", {}))
        return out

    def training_step(self, model, inputs, num_items_in_batch):
        t = time.perf_counter()
        try:
            return super().training_step(model, inputs, num_items_in_batch)
        finally:
            self._step_time += time.perf_counter() - t

    # ---- metrics lines ----------------------------------------------------------------------------
    def _on_step_end(self, state) -> None:
        self._flush()
        total = self._step_time
        phases = {f"time_{p}": self._phase.get(p, 0.0) for p in PHASES[:3] + ("exchange",)}
        phases["time_update"] = max(0.0, total - sum(phases.values()))
        self._pending = {"step": state.global_step, "epoch": state.epoch,
                         "generation": self._generations, "wall_s": time.time() - self._t0,
                         **{k: self._last_gen.get(k) for k in METRIC_KEYS}, **phases,
                         "time_step": total,
                         "curriculum_skipped": self.coevo_reward.curriculum.skipped
                         if self.args.curriculum else None,
                         **{k: self._last_gen.get(k) for k in MATRIX_KEYS}}
        self._phase.clear()
        self._step_time = 0.0

    def _flush(self) -> None:
        if self._pending is not None and self._writer is not None and self.is_world_process_zero():
            self._writer.write(self._pending)
        self._pending = None

    def log(self, logs, start_time=None):
        if self._pending is not None and "loss" in logs:
            trl_metrics = self._metrics.get("train", {})  # what TRL's log() is about to average
            for k in TRL_KEYS:
                if k in logs:
                    self._pending[k] = logs[k]
                elif trl_metrics.get(k):
                    self._pending[k] = sum(trl_metrics[k]) / len(trl_metrics[k])
            self._flush()
        return super().log(logs, start_time)

    def _save_checkpoint(self, model, trial):
        self._flush()  # the step's line is on disk before its checkpoint can count as complete
        out = super()._save_checkpoint(model, trial)
        if self.is_world_process_zero():
            ckpt = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
            if ckpt.is_dir():
                # the estimates every agent shares (adopted from the first agent's payload), not
                # this agent's own pending ones: resumed agents then sample alike
                shared = {str(k): v for k, v in self.coevo_reward.curriculum.estimates.items()}
                (ckpt / STATE_FILE).write_text(json.dumps({"curriculum": shared,
                                                           "best": self.best}))
        return out

    def load_coevo_state(self, checkpoint: Path) -> None:
        """Curriculum estimates and the early-stopping record saved with ``checkpoint``."""
        f = Path(checkpoint) / STATE_FILE
        if f.is_file():
            state = json.loads(f.read_text())
            self.coevo_reward.curriculum.adopt(state.get("curriculum", {}))
            self.best.update(state.get("best", {}))

    def _after_eval(self, pooled: dict) -> None:
        """``keep_best``: save ``best/`` when eval code_acc improves; early stopping after
        ``early_stopping_patience`` evaluations without improvement (SRT). In a pair or ring the
        request travels with the next batch and every agent stops after the same step."""
        a = self.args
        acc = pooled.get("code_acc")
        if acc is None:
            return
        if self.best["code_acc"] is None or acc > self.best["code_acc"]:
            self.best.update(code_acc=acc, step=self.state.global_step, evals_since=0)
            if a.keep_best:
                self.save_model(str(Path(a.output_dir) / "best"))
                if self.is_world_process_zero():
                    (Path(a.output_dir) / "best" / "best.json").write_text(json.dumps(self.best))
        else:
            self.best["evals_since"] += 1
        if a.early_stopping_patience and self.best["evals_since"] >= a.early_stopping_patience:
            self.coevo_reward.stop_requested = True
            if self.coevo_reward.n_agents <= 1:  # alone: stop now (a pair: after the next step)
                self.control.should_training_stop = True

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        """The held-out evaluation (``coevo_code.evaluation.heldout``): k solutions and k tests
        per evaluation problem at the run's temperature, one greedy solution, the reference and
        mutants judging the generated tests; one line in ``eval.jsonl``. The main process
        evaluates; the others wait for its figures."""
        from ..evaluation.heldout import evaluate_model
        a = self.args
        pooled: dict = {}
        tasks = self.coevo_reward.tasks.get("eval") or []
        if self.is_world_process_zero() and tasks:
            model = self.accelerator.unwrap_model(self.model)
            pooled = evaluate_model(
                model, self.processing_class, tasks, self.coevo_reward.executor,
                k=a.num_generations_eval or self.num_generations, temperature=a.temperature or 1.0,
                max_new_tokens=a.max_completion_length, seed=a.seed)  # the same draws each time
        if self.accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list
            box = [pooled]
            broadcast_object_list(box, from_process=0)
            pooled = box[0]
        if self._eval_writer is not None and self.is_world_process_zero():
            self._eval_writer.write({"step": self.state.global_step, **pooled})
        self._after_eval(pooled)
        metrics = {f"{metric_key_prefix}_pooled/{k}": v for k, v in pooled.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if metrics:
            self.log(metrics)  # to report_to and the progress bar
        self.control = self.callback_handler.on_evaluate(a, self.state, self.control, metrics)
        return metrics

    def close(self) -> None:
        self._flush()
        for w in (self._writer, self._eval_writer):
            if w is not None:
                w.close()
        self.coevo_reward.close()
