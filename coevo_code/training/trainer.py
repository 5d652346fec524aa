"""``CoevoTrainer``: TRL's ``GRPOTrainer`` with the paired sampler, the co-evolution reward (and
any others, TRL's way), the rows without signal masked, phase timing, one metrics line per
optimiser step, early stopping, and the held-out evaluation. Everything else is TRL's.

TRL's private methods it overrides, each because no public hook gives the same result:

- ``_get_train_sampler``: the paired sampler (k code rows then k test rows per problem, the
  curriculum) must order the dataset; ``transformers.Trainer`` takes a sampler only from here;
- ``_calculate_rewards`` and ``_generate_and_score_completions``: the rows the coevo reward leaves
  without signal get zero advantage *and* no loss tokens (CURE drops them from its batch); TRL
  zeroes the advantage of a row only when *every* reward function returns None, and never masks
  its tokens (:meth:`CoevoTrainer._mask_rows_without_signal`);
- ``_generate``: the generation phase's time (``time_generation``); with repair turns, it hands
  back a later turn's generation written already (the revisions are written while the first
  turn is scored, :mod:`.repair_turns`) so TRL's scoring runs on them as on any batch;
- ``_generate_and_score_completions`` also joins the later repair turns' batches to the first
  turn's (:meth:`CoevoTrainer._later_turns`, :func:`merge_batches`): each turn's advantages
  over its own groups, one update;
- ``_save_checkpoint``: the step's metrics line is on disk, and the curriculum and early-stopping
  state are in the checkpoint, before the checkpoint can count as complete (a callback's
  ``on_save`` runs only after it is written).

With ``use_vllm``, two more of TRL's internals are replaced (:mod:`.vllm_sync`): the colocated
engine's ``sync_weights`` (vLLM's reload path where vLLM repacks weights, then the weight-sync
check), and, while TRL builds that engine, the ``LLM`` its module calls (to pass the policy's
dtype, which TRL leaves out).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict, deque
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback
from trl import GRPOTrainer

from ..evaluation.heldout import EVAL_KEYS
from .data import PairedSampler
from .repair_turns import REPAIR_KEYS, turn_keys
from .reward import CoevoReward
from .step import CoevoStep, Lockstep
from .modelcard import render as render_card
from .rundir import JsonlWriter, checkpoint_dir, read_jsonl
from .step_metrics import MATRIX_KEYS, METRIC_KEYS
from .vllm_sync import SYNC_KEYS

PHASES = ("generation", "execution", "rewards", "update")
TRL_KEYS = ("loss", "grad_norm", "learning_rate", "entropy", "kl")
STEP_KEYS = (("step", "epoch", "generation", "wall_s") + METRIC_KEYS
             + tuple(f"time_{p}" for p in PHASES) + ("time_exchange", "time_step") + TRL_KEYS
             + ("curriculum_skipped",) + MATRIX_KEYS + SYNC_KEYS)
STATE_FILE = "coevo_state.json"  # in each checkpoint: curriculum estimates, early-stopping record


class _StepEnd(TrainerCallback):
    """The metrics line of each optimiser step: opened at its end, completed with TRL's loss,
    gradient norm, learning rate, entropy and KL when TRL logs them, written once complete; and
    the early stop every agent agreed on."""

    def __init__(self, trainer: "CoevoTrainer"):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer._on_step_end(state)
        if self.trainer.lockstep.stop_all:  # early stopping, agreed by every agent
            control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.trainer._complete_line(logs or {})

    def on_train_end(self, args, state, control, **kwargs):
        self.trainer._flush()


class EarlyStopping(TrainerCallback):
    """After each held-out evaluation: ``keep_best`` saves ``best/`` when its code accuracy
    improves; ``early_stopping_patience`` evaluations without improvement stop the run (SRT's
    early stopping). In a pair or ring the request travels with the next batch and every agent
    stops after the same step. ``best`` is saved with every checkpoint."""

    def __init__(self, trainer: "CoevoTrainer"):
        self.trainer = trainer
        self.best: dict = {"code_acc": None, "step": None, "evals_since": 0}

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        acc = (metrics or {}).get("eval_pooled/code_acc")
        if acc is None:
            return
        if self.best["code_acc"] is None or acc > self.best["code_acc"]:
            self.best.update(code_acc=acc, step=state.global_step, evals_since=0)
            if args.keep_best:
                t = self.trainer
                t.save_model(str(Path(args.output_dir) / "best"))
                if t.is_world_process_zero():
                    (Path(args.output_dir) / "best" / "best.json").write_text(
                        json.dumps(self.best))
        else:
            self.best["evals_since"] += 1
        if args.early_stopping_patience and self.best["evals_since"] >= args.early_stopping_patience:
            self.trainer.lockstep.stop_requested = True
            if self.trainer.coevo.n_agents <= 1:  # alone: stop now (a pair: after the next step)
                control.should_training_stop = True


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


@contextmanager
def _engine_in_policy_dtype(trainer, enabled: bool):
    """While TRL builds its colocated vLLM engine, build it in the policy's dtype. TRL 1.16 gives
    ``LLM`` no dtype, and vLLM's ``auto`` runs a float32 checkpoint in bfloat16 on CPU, so the
    engine would sample from a rounded copy of the float32 policy (the weight-sync check sees a
    mean |delta log p| of 5e-4 on short prompts, 4.5e-3 on MBPP's; 1e-7 in one dtype)."""
    if not enabled:
        yield
        return
    import trl.generation.vllm_generation as vg
    real = getattr(vg, "LLM", None)

    def llm(*args, **kwargs):
        dtype = str(next(trainer.model.parameters()).dtype).removeprefix("torch.")
        if "dtype" not in kwargs and dtype in ("float32", "bfloat16", "float16"):
            kwargs["dtype"] = dtype  # a quantised policy (bitsandbytes) keeps vLLM's choice
        return real(*args, **kwargs)

    if real is not None:
        vg.LLM = llm
    try:
        yield
    finally:
        if real is not None:
            vg.LLM = real


# how each per-row tensor of TRL's batch is padded when batches are joined: (side, value);
# None: the tokenizer's pad token
PAD = {"prompt_ids": ("left", None), "prompt_mask": ("left", 0), "completion_ids": ("right", None),
       "completion_mask": ("right", 0), "old_per_token_logps": ("right", 0),
       "sampling_per_token_logps": ("right", 0), "ref_per_token_logps": ("right", 0),
       "importance_sampling_ratio": ("right", 1), "tool_mask": ("right", 1)}


def merge_batches(parts: list[dict], pad_token_id: int) -> dict:
    """TRL batches (``_generate_and_score_completions``'s dicts) joined row-wise: each per-token
    tensor padded to the widest (prompts on the left, completions on the right, :data:`PAD`),
    per-row tensors concatenated; ``num_items_in_batch`` is left to the caller. A key the
    batches do not all hold, or hold as None in one and a tensor in another, is an error."""
    out: dict = {}
    for key in parts[0]:
        vals = [p.get(key) for p in parts]
        if key == "num_items_in_batch":
            continue
        if all(v is None for v in vals):
            out[key] = None
            continue
        if not all(torch.is_tensor(v) for v in vals):
            raise ValueError(f"cannot join TRL batches on {key!r} (not a tensor in every batch)")
        if vals[0].dim() == 1:
            out[key] = torch.cat(vals)
            continue
        if key not in PAD:
            raise ValueError(f"cannot join TRL batches on {key!r} (no padding rule)")
        side, value = PAD[key]
        value = pad_token_id if value is None else value
        width = max(v.shape[1] for v in vals)
        padded = []
        for v in vals:
            fill = v.new_full((v.shape[0], width - v.shape[1]), value)
            padded.append(torch.cat([fill, v] if side == "left" else [v, fill], dim=1))
        out[key] = torch.cat(padded)
    return out


class CoevoTrainer(GRPOTrainer):
    """``CoevoTrainer(model, args=CoevoConfig, coevo_step=CoevoStep(...), ...)``.

    - the reward functions are coevo's (:class:`CoevoReward` on ``coevo_step``) first, then
      ``reward_funcs`` (TRL reward functions, weighted by ``args.reward_weights``, coevo's
      weight first);
    - the sampler is :class:`PairedSampler` (k code rows then k test rows per problem);
    - rows coevo leaves without a reward (the tests of a problem no solution solves; code rows of
      a problem with no gold test) get zero advantage *and* are masked out of the loss, whatever
      the other reward functions say, as CURE drops them from its batch; with
      ``skip_zero_advantage`` every row of zero advantage then leaves the batch before the update
      (the same update, on fewer rows);
    - phase times: generation (``_generate``), execution and rewards (the step), update (the
      rest of the optimiser step: log-probabilities, loss, backward, optimiser);
    - ``metrics.jsonl`` / ``eval.jsonl`` in the output directory (main process).
    """

    def __init__(self, *args, coevo_step: CoevoStep, n_train: int, reward_funcs=(),
                 write_metrics: bool = True, card: dict | None = None, **kwargs):
        self.coevo = coevo_step
        self.coevo_reward = CoevoReward(coevo_step)
        self.card = dict(card or {})  # base_model, data, eval_data, agent: the model card's
        self._n_train = n_train
        extra = list(reward_funcs or [])
        args_ = kwargs.get("args")
        if (getattr(args_, "use_vllm", False) and args_.vllm_mode == "colocate"
                and int(os.environ.get("WORLD_SIZE", "1")) <= 1
                and not torch.distributed.is_initialized() and not os.environ.get("MASTER_PORT")):
            # a lone process's engine opens a process group of one on MASTER_PORT; unset, TRL
            # takes the first of 29500, 23456, ... that looks free, and two runs started
            # together (a pair's agents, side-by-side tests) both take it: one port the system
            # chose instead (the pair launcher sets one per agent itself)
            from .pair import free_port
            os.environ["MASTER_PORT"] = str(free_port())
        if getattr(args_, "use_vllm", False) and not torch.cuda.is_available():
            if args_.vllm_mode == "server":
                raise ValueError("--vllm_mode server needs a CUDA device: TRL syncs the "
                                 "server's weights over NCCL; on CPU use --vllm_mode colocate")
            # vLLM's CPU backend otherwise reserves 90% of the machine's memory for its KV cache
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(args_.vllm_cpu_kvcache_gib))
            # and, colocated, binds this process's OpenMP threads to the cores it picks for
            # itself (one per physical core, one core held back), after which torch_threads no
            # longer applies: the trainer keeps its own threads unless the user binds them
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        with _engine_in_policy_dtype(self, getattr(args_, "use_vllm", False)
                                     and args_.vllm_mode == "colocate"):
            super().__init__(*args, reward_funcs=[self.coevo_reward, *extra], **kwargs)
        self.sync_check = self._install_vllm_sync() if self.use_vllm else None
        coevo_step.sharding.accelerator = self.accelerator
        self._revisions: list = []   # the generation of each later repair turn of this batch
        self._replay = None          # a generation _generate hands back instead of generating
        if coevo_step.repair is not None:
            if self.accelerator.num_processes > 1:
                raise ValueError(f"--repair_turns {coevo_step.repair.turns} runs on one process "
                                 f"(this launch has {self.accelerator.num_processes}); "
                                 f"use --repair_turns 1 or one process")
            coevo_step.repair.reviser = self._revise
        out = Path(self.args.output_dir)
        keys, eval_keys = STEP_KEYS, EVAL_KEYS  # one turn: the columns of a single-turn run
        if coevo_step.repair is not None:
            keys = STEP_KEYS + REPAIR_KEYS
        if self._eval_turns > 1:
            eval_keys = EVAL_KEYS + turn_keys(self._eval_turns)
        self._writer = JsonlWriter(out / "metrics.jsonl", keys) if write_metrics else None
        self._eval_writer = JsonlWriter(out / "eval.jsonl", eval_keys) if write_metrics else None
        self._phase = defaultdict(float)
        self._step_time = 0.0
        self._generations = 0
        self._last_gen: dict = {}
        self._pending: dict | None = None
        self._no_signal = None
        self._t0 = time.time()
        self.batches: deque = deque(maxlen=4)
        self.add_callback(_StepEnd(self))
        self.early_stopping = EarlyStopping(self)
        self.add_callback(self.early_stopping)
        if any(isinstance(c, ProgressCallback) for c in self.callback_handler.callbacks):
            self.remove_callback(ProgressCallback)
            self.add_callback(_Progress())

    def _install_vllm_sync(self):
        """The weight sync that works where vLLM repacks weights, and its check after every
        ``vllm_sync_check_steps``-th sync (:mod:`.vllm_sync`)."""
        from .vllm_sync import SyncCheck, install_sync, probe_prompts
        a = self.args
        prompts = probe_prompts(self.processing_class,
                                (row["prompt"] for row in self.train_dataset), a.vllm_sync_probes)
        check = SyncCheck(self, prompts, every=a.vllm_sync_check_steps,
                          max_tokens=a.vllm_sync_probe_tokens, min_agree=a.vllm_sync_min_agree,
                          max_logprob_diff=a.vllm_sync_max_logprob_diff)
        install_sync(self.vllm_generation, after=check)
        return check

    @property
    def _eval_turns(self) -> int:
        a = self.args
        return a.eval_repair_turns or a.repair_turns

    @property
    def lockstep(self) -> Lockstep:
        """The state this agent shares with the others (the step's): curriculum, early stop."""
        return self.coevo.lockstep

    @property
    def best(self) -> dict:
        return self.early_stopping.best

    # ---- data order -----------------------------------------------------------------------------
    def _get_train_sampler(self, dataset=None):
        a = self.args
        return PairedSampler(
            n_problems=self._n_train, k=self.num_generations,
            problems_per_batch=a.problems_per_batch,
            batches=a.generation_batches(self._n_train, a.gradient_accumulation_steps),
            repeat=self.num_iterations * a.steps_per_generation, seed=a.seed,
            shuffle=self.shuffle_dataset, p_give_example=a.p_give_example,
            keep=self.lockstep.curriculum.keep if a.curriculum else None)

    # ---- generation, rewards, masking -------------------------------------------------------------
    def _generate(self, prompts):
        if self._replay is not None:  # a later repair turn: written already (_revise)
            gen, self._replay = self._replay, None
            return gen
        t = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            if self.model.training:
                self._phase["generation"] += time.perf_counter() - t

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards of every function (all processes' rows); which of this process's rows
        coevo's reward (the first column) left without signal (NaN). Such a row is NaN for every
        function, so TRL leaves it out of its group's mean and std (its baseline) whatever the
        other functions say."""
        per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        per_func[torch.isnan(per_func[:, 0])] = torch.nan
        mine = slice(self.accelerator.process_index * len(prompts),
                     (self.accelerator.process_index + 1) * len(prompts))
        self._no_signal = torch.isnan(per_func[mine, 0])
        return per_func

    def _mask_rows_without_signal(self, out: dict) -> torch.Tensor:
        """The one place rows without signal are dropped: zero advantage and no loss tokens
        (so they neither move the policy nor count in the loss's token normaliser)."""
        drop = self._no_signal.to(out["completion_mask"].device)
        if drop.any():
            out["completion_mask"] = out["completion_mask"].masked_fill(drop.unsqueeze(1), 0)
            out["advantages"] = out["advantages"].masked_fill(drop, 0.0)
        mask = out["completion_mask"] if out.get("tool_mask") is None else \
            out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        return drop

    def _revise(self, conversations: list) -> list[str]:
        """One completion per conversation (a later repair turn's rows), by the trainer's own
        generation (vLLM or transformers, as the first turn); the generation is kept for
        :meth:`_later_turns`. TRL's server mode writes ``num_generations`` completions of every
        ``num_generations``-th prompt: one each here."""
        k = self.num_generations
        self.num_generations = 1
        try:
            gen = self._generate(conversations)
        finally:
            self.num_generations = k
        self._revisions.append(gen)
        from ..roles import completion_text
        return [completion_text(c) for c in gen[3]]

    def _later_turns(self, inputs, out: dict, drop):
        """The first turn's batch ``out`` joined by the rows of the later repair turns the
        reward step wrote (:mod:`.repair_turns`): each turn through TRL's scoring as its own
        batch (its groups: k revisions of one problem), its generation replayed, its
        advantages times ``repair_advantage_weight``, then the rows concatenated (prompts padded
        on the left, completions on the right)."""
        gens, self._revisions = self._revisions, []
        later = self.coevo.repair.later if self.coevo.repair is not None else []
        if not later:
            return out, drop
        first = {}
        for row in inputs:  # the dataset columns of each problem's code row
            if row["role"] == "code":
                first.setdefault(int(row["task_index"]), row)
        parts, drops = [out], [drop]
        for tr, gen in zip(later, gens):
            rows = [{**first[ti], "prompt": conv, "turn": tr.turn}
                    for ti, conv in zip(tr.task_index, tr.prompts)]
            self._replay = gen
            part = super()._generate_and_score_completions(rows)
            if self.args.repair_advantage_weight != 1.0:
                part["advantages"] = part["advantages"] * self.args.repair_advantage_weight
            drops.append(self._mask_rows_without_signal(part))
            parts.append(part)
        out = merge_batches(parts, self.processing_class.pad_token_id)
        mask = out["completion_mask"] if out.get("tool_mask") is None else \
            out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        return out, torch.cat([d.to(out["advantages"].device) for d in drops])

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        drop = self._mask_rows_without_signal(out)
        if self.coevo.repair is not None and self.model.training:
            out, drop = self._later_turns(inputs, out, drop)
        mask = out["completion_mask"] if out.get("tool_mask") is None else \
            out["completion_mask"] * out["tool_mask"]
        self.batches.append({"dropped": drop.tolist(), "advantages": out["advantages"].tolist(),
                             "tokens": mask.sum(dim=1).tolist()})  # local rows, for inspection
        if self.args.skip_zero_advantage and self.model.training:
            out = self._without_zero_advantage(out)
        self.batches[-1]["updated"] = len(out["advantages"])  # rows the update runs on
        last = self.coevo.last
        if self.model.training and last is not None:
            self._generations += 1
            for p in ("execution", "rewards", "exchange"):
                self._phase[p] += last.phases.get(p, 0.0)
            self._last_gen = dict(last.metrics)
        return out

    @staticmethod
    def _without_zero_advantage(out: dict) -> dict:
        """The batch without its rows of zero advantage (``--skip_zero_advantage``). With
        ``beta = 0``, TRL's per-token loss is ``-min(r A, clip(r) A)``, zero for such a row
        whatever its log-probabilities, and ``dapo`` divides by ``num_items_in_batch``, counted
        over every row above and kept as it is: the loss and its gradient are unchanged, the
        forward and backward pass run on fewer rows. One row stays when none has a signal (every
        process then still runs its backward pass, with a zero loss)."""
        adv = out["advantages"]
        keep = adv != 0
        if not keep.any():
            keep[0] = True
        n = len(adv)
        return {k: v[keep] if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == n else v
                for k, v in out.items()}

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
                         "curriculum_skipped": self.lockstep.curriculum.skipped
                         if self.args.curriculum else None,
                         **{k: self._last_gen.get(k) for k in MATRIX_KEYS}}
        if self.coevo.repair is not None:
            self._pending.update({k: self._last_gen.get(k) for k in REPAIR_KEYS})
        if self.sync_check is not None and self.sync_check.last is not None:
            self._pending.update(self.sync_check.last.figures())  # the check of this step's sync
            self.sync_check.last = None
        self._phase.clear()
        self._step_time = 0.0

    def _flush(self) -> None:
        if self._pending is not None and self._writer is not None and self.is_world_process_zero():
            self._writer.write(self._pending)
        self._pending = None

    def _complete_line(self, logs: dict) -> None:
        """TRL's figures of the step (``logs`` as TRL logs them, its metrics averaged in) on the
        pending metrics line, which is then written."""
        if self._pending is not None and "loss" in logs:
            for k in TRL_KEYS:
                if logs.get(k) is not None:
                    self._pending[k] = logs[k]
            self._flush()

    def _save_checkpoint(self, model, trial):
        self._flush()  # the step's line is on disk before its checkpoint can count as complete
        out = super()._save_checkpoint(model, trial)
        if self.is_world_process_zero():
            ckpt = checkpoint_dir(self.args.output_dir, self.state.global_step)
            if ckpt.is_dir():
                # the estimates every agent shares (adopted from the first agent's payload), not
                # this agent's own pending ones: resumed agents then sample alike
                shared = {str(k): v for k, v in
                          self.lockstep.curriculum.estimates.items()}
                (ckpt / STATE_FILE).write_text(json.dumps({"curriculum": shared,
                                                           "best": self.best}))
        return out

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        """The run directory's ``README.md`` (TRL calls this with every checkpoint): coevo's card
        (:mod:`.modelcard`) in place of TRL's template."""
        out = Path(self.args.output_dir)
        self.write_model_card(out / "README.md", weights=str(out / "final"))

    def write_model_card(self, path: Path, weights: str) -> None:
        """Write the model card (main process), from the metrics and evaluations so far."""
        if not self.is_world_process_zero():
            return
        out = Path(self.args.output_dir)
        steps, evals = (read_jsonl(f) if f.is_file() else []
                        for f in (out / "metrics.jsonl", out / "eval.jsonl"))
        card = self.card
        Path(path).write_text(render_card(
            name=out.name, base_model=card.get("base_model") or "tiny",
            label_source=self.args.label_source, data=card.get("data", "-"),
            eval_data=card.get("eval_data"), step=self.state.global_step,
            last_step=steps[-1] if steps else None, first_eval=evals[0] if evals else None,
            last_eval=evals[-1] if evals else None, agent=card.get("agent"), weights=weights))

    def load_coevo_state(self, checkpoint: Path) -> None:
        """Curriculum estimates and the early-stopping record saved with ``checkpoint``."""
        f = Path(checkpoint) / STATE_FILE
        if f.is_file():
            state = json.loads(f.read_text())
            self.lockstep.curriculum.adopt(state.get("curriculum", {}))
            self.best.update(state.get("best", {}))

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        """The held-out evaluation (``coevo_code.evaluation.heldout``): k solutions and k tests
        per evaluation problem at the run's temperature, one greedy solution, the reference and
        mutants judging the generated tests; one line in ``eval.jsonl``. The main process
        evaluates; the others wait for its figures."""
        from ..evaluation.heldout import evaluate_model
        a = self.args
        pooled: dict = {}
        tasks = self.coevo.tasks.get("eval") or []
        if self.is_world_process_zero() and tasks:
            model = self.accelerator.unwrap_model(self.model)
            pooled = evaluate_model(
                model, self.processing_class, tasks, self.coevo.executor,
                k=a.num_generations_eval or self.num_generations, temperature=a.temperature or 1.0,
                max_new_tokens=a.max_completion_length, seed=a.seed,  # the same draws each time
                repair_turns=self._eval_turns, repair_feedback=a.repair_feedback,
                repair_max_failing=a.repair_max_failing,
                repair_agreement=a.repair_feedback_agreement)
        if self.accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list
            box = [pooled]
            broadcast_object_list(box, from_process=0)
            pooled = box[0]
        if self._eval_writer is not None and self.is_world_process_zero():
            self._eval_writer.write({"step": self.state.global_step, **pooled})
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
        self.coevo.close()
