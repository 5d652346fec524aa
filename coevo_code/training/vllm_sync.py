"""vLLM beside the trainer (``use_vllm``): a weight sync that works on every platform vLLM runs
on, and a check, while training, that vLLM samples from the policy's weights.

**The sync.** TRL's colocate sync (``VLLMGeneration.sync_weights``) hands each parameter to
``model.load_weights``, which copies it into vLLM's parameter in place. That holds only where vLLM
keeps its parameters as loaded. Where it repacks them after loading (its CPU backend packs every
linear layer for oneDNN / SGL kernels and leaves an empty parameter behind; quantised and FP8
layers on GPU keep a processed copy), there is nothing to copy into (``AttributeError: 'Parameter'
object has no attribute 'weight_loader'``). There the sync goes through vLLM's own reload path,
``model_runner.reload_weights(weights_iterator=...)``: each layer is rebuilt from the policy's
weights and processed again, as at load time. One more step is needed after it: a layer whose
weight is *tied* to another's (the LM head of a model with ``tie_word_embeddings``) gets no weight
of its own from the iterator, so vLLM places its old processed copy back, and the engine samples
through last step's head with this step's embeddings; :func:`reprocess_tied` processes such
layers again from the shared weight. Elsewhere the sync is TRL's. The weights come from TRL's own
iterator (DeepSpeed ZeRO-3 and FSDP gathering, LoRA adapters merged into the synced weights).

**The check** (:class:`SyncCheck`). After a sync (every ``vllm_sync_check_steps``), a fixed set
of probe prompts (the first training problems' prompts) is completed greedily by vLLM, with the
log-probability of each token; the policy then scores the same tokens in one forward pass.
``vllm_sync_agree`` is the share of probes on which vLLM's every token is the policy's greedy
choice (its arg-max, or within a near-tie margin of it), that is, on which the two greedy
completions are the same up to near-ties; ``vllm_sync_logprob_diff`` is the mean over probe
tokens of ``|log p_vllm - log p_policy|`` (``vllm_sync_logprob_diff_max`` the largest). A run
whose figures cross the thresholds stops with a one-line :class:`WeightSyncError` that names the
step. Thresholds by the policy's dtype (``vllm_sync_min_agree`` / ``vllm_sync_max_logprob_diff``
override them):

- float32 (CPU): every probe agrees (near-tie margin 1e-3) and the mean difference is at most
  1e-4. Measured on the tiny model, default settings, probe prompts of 98 to 157 tokens, the
  engine in float32 as the policy: through the 90 steps of the default run, synced, the mean is
  5.7e-9 to 7.0e-7 (largest single difference 5.9e-5; near-ties flip nowhere); one sync skipped
  after a step of the default learning rate, the mean is 6.0e-3 (largest 0.18) and half the
  probes disagree.
- bfloat16 / float16 (GPU): at least three quarters of the probes agree (near-tie margin 0.1)
  and the mean difference is at most 1e-2. Measured here with vLLM in bfloat16 against the
  float32 policy (what TRL builds on CPU unless given a dtype): over the 90 steps of the default
  run the mean stayed between 1.5e-4 and 9.8e-4 (largest single difference 0.043, at tokens of
  probability around one half), every probe agreeing within a margin of 0.05; a sync skipped
  gave 5.0e-3. So in half precision the check catches a broken sync (a stale or untied layer,
  weights many steps old), not one step skipped at a small learning rate. Not yet measured on a
  GPU, where both sides are bf16 and run different kernels.

The engine is built in the policy's dtype (``_engine_in_policy_dtype`` in :mod:`.trainer`): TRL
gives vLLM none, and vLLM's ``auto`` runs a float32 checkpoint in bfloat16 on CPU.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass

import torch

# by the policy's dtype (see the docstring): the least share of probes that agree, the largest
# mean |delta log p| of a probe token, and the near-tie margin within which either engine's
# greedy choice counts as agreeing
THRESHOLDS = {torch.float32: (1.0, 1e-4, 1e-3), torch.float64: (1.0, 1e-4, 1e-3)}
HALF_THRESHOLDS = (0.75, 1e-2, 0.1)
SYNC_KEYS = ("vllm_sync_agree", "vllm_sync_logprob_diff", "vllm_sync_logprob_diff_max")


class WeightSyncError(RuntimeError):
    """vLLM does not sample from the policy's weights; the message names the step."""


def needs_reload(model: torch.nn.Module) -> bool:
    """Whether vLLM has repacked this model's weights after loading (an emptied parameter, as
    the CPU backend leaves, or a quantised layer), so that an in-place ``load_weights`` has
    nothing to load into and the sync must rebuild the layers."""
    if getattr(model, "quant_config", None) is not None:
        return True
    return any(p.numel() == 0 for p in model.parameters())


@torch.no_grad()
def reprocess_tied(model: torch.nn.Module) -> list[str]:
    """Process again every vLLM layer whose weight is the same parameter as an earlier layer's
    (a tied LM head): the reload rebuilt the parameter through the first layer only. Returns the
    names of the layers processed."""
    first: dict[int, str] = {}
    done = []
    for name, module in model.named_modules(remove_duplicate=False):
        weight, method = getattr(module, "weight", None), getattr(module, "quant_method", None)
        if not isinstance(weight, torch.nn.Parameter) or method is None:
            continue
        if id(weight) in first and first[id(weight)] != name:
            method.process_weights_after_loading(module)
            done.append(name)
        else:
            first.setdefault(id(weight), name)
    return done


def push_weights(generation) -> str:
    """Sync the policy's weights into ``generation``'s colocated engine (a TRL
    ``VLLMGeneration``), by vLLM's reload path where it repacks weights and TRL's in-place load
    elsewhere. Returns which path ran (``reload`` or ``load``)."""
    # the engine's model runner, in this process (TRL's external_launcher)
    runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
    if not needs_reload(runner.model):
        for name, param in generation._iter_named_params():
            runner.model.load_weights([(name, param)])
        return "load"
    # each tensor copied: the reload buffers a layer's tensors until the layer is whole, and a
    # gathered ZeRO-3 parameter is released as soon as the iterator moves on
    runner.reload_weights(weights_iterator=((name, param.detach().clone())
                                            for name, param in generation._iter_named_params()),
                          is_checkpoint_format=True)
    reprocess_tied(runner.model)
    return "reload"


def install_sync(generation, after=None) -> None:
    """Replace ``generation.sync_weights`` (TRL's, which the trainer calls once per generation
    batch) by one that pushes the weights with :func:`push_weights` in colocate mode (TRL's own
    sync in server mode), then calls ``after()`` (the check)."""
    trl_sync = generation.sync_weights

    def sync_weights(self):
        if self.mode == "colocate":
            if self.enable_sleep_mode:  # as TRL: the weights must be mapped before loading
                from trl.trainer.utils import empty_cache
                empty_cache()
                self.llm.wake_up(tags=["weights"])
                self._llm_weights_sleeping = False
            self.last_sync_path = push_weights(self)
            self.llm.reset_prefix_cache()
        else:
            trl_sync()
        if after is not None:
            after()

    generation.sync_weights = types.MethodType(sync_weights, generation)


@dataclass
class ProbeResult:
    agree: float
    logprob_diff: float  # mean over probe tokens
    logprob_diff_max: float = 0.0

    def figures(self) -> dict:
        return dict(zip(SYNC_KEYS, (self.agree, self.logprob_diff, self.logprob_diff_max)))


def compare(completions: list[list[int]], vllm_logprobs: list[list[float]],
            policy_logits: list[torch.Tensor], tie: float = 0.0) -> ProbeResult:
    """The check's figures from vLLM's greedy completions (token ids and their log-probabilities)
    and the policy's logits at those positions (one ``[len(completion), vocab]`` tensor per
    probe). A probe agrees when at every position vLLM's token is the policy's greedy choice: its
    arg-max, or within ``tie`` of the arg-max's log-probability (two engines that differ by that
    much in rounding may break such a near-tie either way). An empty completion
    agrees; no probe at all gives agreement 1.

    ``logprob_diff``: the mean over probe tokens of ``|log p_vllm - log p_policy|``;
    ``logprob_diff_max``: the largest."""
    same, diff, total, n = 0, 0.0, 0.0, 0
    for completion, lps, logits in zip(completions, vllm_logprobs, policy_logits):
        if not completion:
            same += 1
            continue
        logp = logits.float().log_softmax(-1)
        tokens = torch.tensor(completion)
        mine = logp[torch.arange(len(completion)), tokens]
        same += bool((mine >= logp.max(-1).values - tie).all())
        theirs = torch.tensor([x if x is not None and math.isfinite(x) else float("nan")
                               for x in lps])
        d = (mine - theirs).abs().nan_to_num(float("inf"))
        diff = max(diff, float(d.max()))
        total, n = total + float(d.sum()), n + len(d)
    return ProbeResult(same / max(1, len(completions)), total / max(1, n), diff)


class SyncCheck:
    """The weight-sync check of one trainer (see the module docstring). ``every``: check after
    every n-th sync (0: never)."""

    def __init__(self, trainer, prompts: list[list[int]], every: int = 1, max_tokens: int = 32,
                 min_agree: float | None = None, max_logprob_diff: float | None = None):
        self.trainer, self.prompts, self.every, self.max_tokens = trainer, prompts, every, max_tokens
        dtype = next(trainer.model.parameters()).dtype
        auto = THRESHOLDS.get(dtype, HALF_THRESHOLDS)
        self.min_agree = auto[0] if min_agree is None else min_agree
        self.max_logprob_diff = auto[1] if max_logprob_diff is None else max_logprob_diff
        self.tie = auto[2]
        self.syncs = 0
        self.last: ProbeResult | None = None  # figures of the latest check, taken by the step line

    def __call__(self) -> None:
        self.syncs += 1
        if not self.every or not self.prompts or (self.syncs - 1) % self.every:
            return
        result = self.run()
        self.last = result
        t = self.trainer
        if result.agree < self.min_agree or result.logprob_diff > self.max_logprob_diff:
            raise WeightSyncError(
                f"after step {t.state.global_step}: vLLM does not sample from the policy's "
                f"weights after the weight sync: {result.agree:.2f} of {len(self.prompts)} probes "
                f"agree (at least {self.min_agree:g} wanted), log-probabilities "
                f"{result.logprob_diff:.2e} apart on average (at most "
                f"{self.max_logprob_diff:g}; largest {result.logprob_diff_max:.2e})")

    def _vllm_greedy(self) -> tuple[list[list[int]], list[list[float]]]:
        gen = self.trainer.vllm_generation
        if gen.mode == "colocate":
            from vllm import SamplingParams
            from vllm.inputs import TokensPrompt
            outs = gen.llm.generate([TokensPrompt(prompt_token_ids=p) for p in self.prompts],
                                    SamplingParams(temperature=0.0, max_tokens=self.max_tokens,
                                                   logprobs=0),
                                    use_tqdm=False)
            ids = [list(o.outputs[0].token_ids) for o in outs]
            lps = [[lp[t].logprob for t, lp in zip(i, o.outputs[0].logprobs)]
                   for i, o in zip(ids, outs)]
            return ids, lps
        # server mode: the main process asks the server; the others receive its answer
        from accelerate.utils import broadcast_object_list
        box = [None]
        if self.trainer.accelerator.is_main_process:
            out = gen.vllm_client.generate(prompts=self.prompts, n=1, temperature=0.0,
                                           max_tokens=self.max_tokens, logprobs=0)
            box = [(out["completion_ids"], [[x[0] for x in row] for row in out["logprobs"]])]
        broadcast_object_list(box, from_process=0)
        return box[0]

    @torch.no_grad()
    def _policy_logits(self, completions: list[list[int]]) -> list[torch.Tensor]:
        from trl.models.utils import unwrap_model_for_generation
        t = self.trainer
        out = []
        with unwrap_model_for_generation(t.model_wrapped, t.accelerator) as model:
            was_training = model.training
            model.eval()
            device = next(model.parameters()).device
            try:
                for prompt, completion in zip(self.prompts, completions):
                    ids = torch.tensor([prompt + completion], device=device)
                    logits = model(input_ids=ids).logits[0]
                    out.append(logits[len(prompt) - 1:len(prompt) - 1 + len(completion)].cpu())
            finally:
                model.train(was_training)
        return out

    def run(self) -> ProbeResult:
        """Both engines on the probes; every process checks its own engine, and the run's figures
        are the worst of them (so every process stops together)."""
        ids, lps = self._vllm_greedy()
        result = compare(ids, lps, self._policy_logits(ids), tie=self.tie)
        acc = self.trainer.accelerator
        if acc.num_processes > 1:
            worst = acc.gather(torch.tensor(
                [[-result.agree, result.logprob_diff, result.logprob_diff_max]],
                device=acc.device)).max(dim=0).values
            result = ProbeResult(float(-worst[0]), float(worst[1]), float(worst[2]))
        return result


def probe_prompts(tokenizer, conversations, n: int) -> list[list[int]]:
    """Token ids of the first ``n`` distinct conversations, with the chat template's generation
    prompt (the check's probes)."""
    seen, out = set(), []
    for conv in conversations:
        key = repr(conv)
        if key in seen:
            continue
        seen.add(key)
        ids = tokenizer.apply_chat_template(conv, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        out.append([int(i) for i in ids])
        if len(out) >= n:
            break
    return out
