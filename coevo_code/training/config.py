"""The training config: TRL's ``GRPOConfig`` plus the co-evolution fields.

Everything TRL documents for ``GRPOConfig`` holds (``num_generations`` is k, the number of
solutions *and* of tests per problem; ``learning_rate``, ``beta``, ``temperature``,
``max_completion_length``, ``use_vllm``, ``report_to``, ``save_steps``, ...). YAML files given to
``coevo train --config FILE`` set these fields by name; any field can be overridden on the command
line in TRL's form (``--max_steps 12 --save_steps 1``). The model is TRL's ``ModelConfig``
(``--model_name_or_path``, ``--dtype``, ``--use_peft``, ``--lora_r``, ...); with no model the run
uses the tiny model that ships with the package.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from dataclasses import dataclass, field

from trl import GRPOConfig

from ..argv import OptionMetadata, option
from ..execution.options import ExecutionOptions
from ..execution.registry import check_backend
from ..labels import JUDGES as LABEL_JUDGES
from ..labels import SOURCES as LABEL_SOURCES
from ..labels import label_source as find_label_source
from ..repair import CREDITS as REPAIR_CREDITS
from ..repair import REVISION_GROUPS
from ..tasks import LoaderError, find_loader
from .controls import CONTROLS, ROLES_TRAINED
from .repair_turns import REPAIR_FEEDBACK
from .scoring import RewardOptions
from .step import MAX_ROWS_MASKED

_Metadata = OptionMetadata


def _f(default, help: str, **kw):
    return option(default, help, **kw)


def _lock(default, help: str, **kw):
    """A field every agent of a pair or ring must share (:func:`lockstep_fields`)."""
    return _f(default, help, lockstep=True, **kw)


@dataclass
class CoevoConfig(GRPOConfig, ExecutionOptions, RewardOptions):
    r"""``GRPOConfig`` with the co-evolution fields (CURE: Wang et al., arXiv:2506.03136).

    Data
        tasks: dataset name (``bundled``, ``codecontests``, ``cure``, ``mbpp``, ``humaneval``,
            ``livecodebench``, ... see ``coevo tasks check``); tasks_path: a local file (default: the
            public source); tasks_split; tasks_limit: a seeded sample of that many problems;
            tasks_release, tasks_start_date, tasks_end_date, tasks_platform: LiveCodeBench's
            release, contest-date window (both ends included) and platforms, as ``--release``,
            ``--start_date``, ``--end_date`` and ``--platform`` of ``coevo eval``.
        eval_tasks, eval_tasks_path, eval_tasks_split, eval_tasks_limit, eval_tasks_release,
            eval_tasks_start_date, eval_tasks_end_date, eval_tasks_platform: an optional labelled
            set scored every ``eval_steps`` (code accuracy, unit-test accuracy, best-of-N); a
            window after the training one keeps the evaluation problems newer than the training
            ones.
    Rewards
        label_source: where the correct set comes from: ``gold`` (the gold tests), or label-free
            (``coevo_code.labels``): ``partner`` / ``ring`` (Co-RL: the other agents' tests and
            votes; a run of several agents, see ``training/pair.py``), ``self_majority`` (SRT/TTRL
            majority vote), ``frozen`` (a fixed labeller's completions, ``frozen_labels``).
        label_threshold: a vote labels a problem only when its largest cluster holds at least this
            share of the labeller's solutions (else the problem is unlabelled: zero advantage).
        label_judge: what a label-free label judges a solution by: ``tests`` (the labeller's
            accurate tests) or ``answers`` (the labeller's pseudo-correct answer on the input of
            every generated test of the problem, both agents' tests; ``coevo_code.labels``).
        max_gold_tests: gold tests used per problem (CURE: at most 8).
        known_wrong: up to this many of a problem's known wrong programs (mutants, published
            incorrect solutions) join W in the test rewards once a gold test fails them (0:
            CURE's formula; docs/CORE.md "Known wrong programs").
        reward_shown_tests: reward on the examples the statement shows as well; by default a
            problem with hidden gold tests is rewarded on those only (a program that prints the
            shown answers earns nothing), and stdio tests expecting an empty output are left out
            where others remain (``training/data.py::reward_tasks``).
        code_all_passed: code reward 1/0 for passing all gold tests instead of the share passed.
        post_stage: CURE's post-stage test reward (a test counts a wrong solution's catch only if
            it catches every wrong solution).
        length_shaping, min_len, max_len: CURE's response-length shaping for long chain-of-thought
            models (lengths in tokens; forces ``scale_rewards="none"``, see ``scoring.py``).
        bon_n, bon_m: the best-of-N setting logged every step (CURE's (4, 4)).
        reward_control: ``shuffle`` (each role's rewards permuted within the batch) or ``flip``
            (negated): the controls that show a rise comes from the reward.
        train_roles: ``both`` (CURE: coder and tester trained together), ``code`` (coder only:
            the test rows get no reward) or ``test`` (tester only): the ablations of co-training.
        reward_funcs: more reward functions beside coevo's, TRL's way: a TRL reward's name
            (``think_format_reward``, ``get_soft_overlong_punishment``: see :data:`EXTRA_REWARDS`)
            or a dotted import path (``my_lib.rewards.custom``); ``reward_weights`` (TRL's) then
            weighs coevo's first, then these. A row coevo leaves without signal stays masked.
    Prompts
        p_give_example: probability that a prompt shows the problem's public examples (CURE 1.0);
            drawn once per problem visit, for both roles; max_input_examples: how many (CURE: 1).
    Batch
        problems_per_generation: problems per generation batch; sets ``generation_batch_size``
            to problems_per_generation x 2 x num_generations (k code rows then k test rows per
            problem). Its old name ``problems_per_step`` still works, with a warning (a step is
            an optimiser step everywhere else, and one generation batch can serve several).
        skip_zero_advantage: leave the rows whose advantage is zero out of the update's forward
            and backward pass. With ``beta = 0`` and TRL's ``dapo`` loss such a row adds nothing
            to the loss or its gradient, and the normaliser still counts its tokens, so the update
            is the same, for less compute (about half the rows of a tiny-model batch). TRL's
            entropy and clip figures are then means over the rows kept.
    Execution
        exec_backend (``local`` slots on this machine, or ``ray``: a Ray cluster's CPU nodes,
        docs/EXECUTION.md), exec_address (the Ray cluster; default: a local Ray instance),
        exec_slots (default: CPU cores / local processes; under Ray, slots per node shared by
        every process of the run), exec_launcher
        (auto, bwrap, direct, docker), exec_allow_unsafe, exec_no_uid: the fields of
        :class:`~coevo_code.execution.options.ExecutionOptions`, which every command that runs
        programs takes; exec_time_limit_s (override every task's limit).
        max_rows_masked: a cell whose judge, container or node was lost, and lost again when
            re-run on a fresh one (``sandbox_error``), masks the rows whose reward it could have
            changed (no reward, no advantage, out of their group's baseline); past this share of
            a step's rows the run stops with a one-line error (``--resume`` continues it).
    Label-free runs
        frozen_labels: the frozen labeller's completions (``generations.jsonl`` of ``coevo eval``);
            frozen_model: the model that writes them at the start when the file does not exist.
        problem_field: show this metadata field of each problem instead of its statement (a
            rephrased column: two agents of one family then see different surface forms).
        curriculum, curriculum_window: train only on problems whose pass rate, estimated without
            labels from the vote share of their latest rollouts, lies in the window (unseen
            problems are kept).
        keep_best, early_stopping_patience: keep ``best/`` (the weights with the best eval
            ``code_acc``); stop after that many evaluations without improvement (SRT).
    Several agents (filled in by the pair launcher; see ``training/pair.py``)
        agent_name, agent_names, exchange_timeout_s.
    vLLM (``use_vllm``; ``training/vllm_sync.py``)
        vllm_sync_check_steps: after every n-th weight sync, probe prompts completed greedily by
            vLLM and scored by the policy (``vllm_sync_agree``, ``vllm_sync_logprob_diff`` in
            metrics.jsonl); the run stops when they cross ``vllm_sync_min_agree`` /
            ``vllm_sync_max_logprob_diff``; vllm_sync_probes, vllm_sync_probe_tokens: its size.
            vllm_cpu_kvcache_gib: vLLM's KV cache on CPU.
    Machine
        torch_threads: torch intra-op threads. The default run takes 2 on a 2-core machine (the
            model and the sandbox take turns; a tiny-model step 3.0 s instead of 4.0 s); the tests
            take 1, since there other processes run beside the model and two threads on two cores
            made tiny-model steps swing from 0.1 s to 10 s.
    """

    # data
    tasks: str = _lock("bundled", "training problems: a dataset name (see `coevo tasks check`)")
    tasks_path: str | None = _lock(None, "local file of the training problems (default: the "
                                         "public source)")
    tasks_split: str | None = _lock(None, "split of the training dataset")
    tasks_limit: int | None = _lock(None, "use a seeded sample of this many training problems")
    tasks_release: str | None = _lock(None, "livecodebench training problems: release_v1 ... "
                                            "release_v6, release_latest, or v1 ... v6")
    tasks_start_date: str | None = _lock(None, "livecodebench training problems: first contest "
                                               "date kept (YYYY-MM-DD)")
    tasks_end_date: str | None = _lock(None, "livecodebench training problems: last contest "
                                             "date kept (YYYY-MM-DD, included)")
    tasks_platform: str | None = _lock(None, "livecodebench training problems: leetcode, atcoder "
                                             "and/or codeforces (comma-separated)")
    tasks_examples: int | None = _lock(None, "world training problems: this many gold tests of "
                                             "each become its public examples (the rest judge)")
    tasks_strict: bool = _lock(False, "a row of tasks or eval_tasks the loader cannot use ends "
                                      "the start with its one-line error (default: skipped and "
                                      "counted in the load report)")
    eval_tasks: str | None = _lock(None, "labelled evaluation problems scored every eval_steps")
    eval_tasks_path: str | None = _lock(None, "local file of the evaluation problems")
    eval_tasks_split: str | None = _lock(None, "split of the evaluation dataset")
    eval_tasks_limit: int | None = _lock(None, "use a seeded sample of this many evaluation "
                                               "problems")
    eval_tasks_release: str | None = _lock(None, "livecodebench evaluation problems: release "
                                                 "(as tasks_release)")
    eval_tasks_start_date: str | None = _lock(None, "livecodebench evaluation problems: first "
                                                    "contest date kept (YYYY-MM-DD)")
    eval_tasks_end_date: str | None = _lock(None, "livecodebench evaluation problems: last "
                                                  "contest date kept (YYYY-MM-DD, included)")
    eval_tasks_platform: str | None = _lock(None, "livecodebench evaluation problems: platforms "
                                                  "(as tasks_platform)")
    eval_tasks_examples: int | None = _lock(None, "world evaluation problems: public examples "
                                                  "(as tasks_examples)")
    # rewards
    # (label_source, max_gold_tests, code_all_passed, post_stage, length_shaping, min_len,
    # max_len, label_threshold, label_judge, bon_n, bon_m: RewardOptions')
    reward_shown_tests: bool = _f(False, "reward on the examples a statement shows too (default: "
                                         "on the hidden gold tests, where a problem has any)")
    reward_control: str = _f("none", "a control run: train on rewards shuffled within each batch "
                                     "(shuffle) or negated (flip)", choices=list(CONTROLS))
    train_roles: str = _f("both", "roles trained: both (CURE), code (coder only) or test (tester "
                                  "only); the other role's rows get no reward",
                          choices=list(ROLES_TRAINED))
    reward_funcs: list[str] = field(default_factory=list, metadata={
        "help": "more reward functions beside coevo's: a TRL reward's name or a dotted import "
                "path (weights: reward_weights, coevo's first)"})
    # prompts
    p_give_example: float = _lock(1.0, "probability that a prompt shows public examples (CURE 1.0)")
    max_input_examples: int = _lock(1, "public examples shown when shown (CURE: 1)")
    # batch
    problems_per_generation: int | None = _lock(None, "problems per generation batch (sets "
                                                   "generation_batch_size = problems x 2 x k)")
    problems_per_step: int | None = _lock(None, "the old name of problems_per_generation")
    skip_zero_advantage: bool = _f(False, "leave rows with zero advantage out of the update's "
                                          "forward and backward (the same update; needs beta=0 "
                                          "and loss_type dapo)")
    # execution
    # (exec_backend, exec_address, exec_slots, exec_launcher, exec_allow_unsafe, exec_no_uid:
    # ExecutionOptions')
    exec_time_limit_s: float | None = _f(None, "CPU seconds per test for every task (default: "
                                               "each task's own limit)")
    max_rows_masked: float = _f(MAX_ROWS_MASKED, "stop the run when more than this share of a "
                                                 "step's rows is masked for sandbox cells lost "
                                                 "twice (sandbox_error); 1: never stop")
    # repair turns (training/repair_turns.py; docs/TRAINING.md, Repair turns)
    repair_turns: int = _lock(1, "turns per coder episode: after a turn whose solution fails its "
                                 "feedback tests, the coder revises it, shown the failing tests "
                                 "(1: one attempt, the single-turn run)")
    repair_feedback: str = _lock("self", "the tests a solution is checked against between turns: "
                                         "self (the tests the policy wrote for the problem in "
                                         "this step) or public (the problem's examples)",
                                 choices=list(REPAIR_FEEDBACK))
    repair_feedback_agreement: int = _lock(0, "after the first turn, show only the feedback tests "
                                              "at least this many of the problem's first-turn "
                                              "solutions pass (CodeT's agreement; 0: all)")
    repair_credit: str = _f("turn", "each turn's reward: turn (its own solution's), final (the "
                                    "episode's end, RLEF's) or improvement (its gain over the "
                                    "turn it revises)", choices=list(REPAIR_CREDITS))
    repair_test_credit: float = _f(1.0, "weight of the tester's repair credit (self feedback): "
                                        "tests shown to a wrong solution whose revision passed "
                                        "the gold tests")
    repair_advantage_weight: float = _f(1.0, "the later turns' advantages are multiplied by "
                                             "this before the update (1: a revision row weighs "
                                             "as a first-turn row)")
    repair_max_failing: int = _lock(2, "failing feedback tests shown per turn")
    repair_groups: str = _lock("problem", "a later turn's group of k revisions: problem (the "
                                          "problem's open solutions, cycled) or solution (k "
                                          "revisions of one open solution, drawn at random: "
                                          "one conversation per group)",
                               choices=list(REVISION_GROUPS))
    eval_repair_turns: int | None = _f(None, "the held-out evaluation in this many turns "
                                             "(default: repair_turns; 2 with repair_turns 1: a "
                                             "single-turn run measured in two)")
    # label-free runs
    frozen_labels: str | None = _lock(None, "frozen labeller's completions (generations.jsonl)")
    frozen_model: str | None = _lock(None, "model that writes frozen_labels when it is missing")
    problem_field: str | None = _f(None, "show this metadata field instead of the statement")
    curriculum: bool = _lock(False, "keep problems whose label-free pass rate is in the window")
    curriculum_window: list[float] = field(
        default_factory=lambda: [0.05, 0.75],
        metadata=_Metadata(lockstep=True, help="curriculum: [low, high] estimated pass rate kept"))
    keep_best: bool = _f(False, "keep best/: the weights with the best eval code_acc")
    early_stopping_patience: int = _lock(0, "stop after this many evals without improvement "
                                            "(0: off)")
    # several agents
    agent_name: str = _lock("", "this agent's name in a pair or ring (set by the launcher)")
    agent_names: list[str] = field(default_factory=list, metadata=_Metadata(
        lockstep=True, help="every agent of the pair or ring, in order (set by the launcher)"))
    exchange_timeout_s: float = _lock(600.0, "seconds to wait for another agent's completions")
    # machine
    torch_threads: int | None = _f(None, "torch intra-op threads (1 on small CPUs)")
    # vLLM (use_vllm): the weight-sync check (training/vllm_sync.py)
    vllm_sync_check_steps: int = _f(1, "with use_vllm: check after every n-th weight sync that "
                                       "vLLM samples from the policy's weights (0: off)")
    vllm_sync_probes: int = _f(4, "with use_vllm: probe prompts of the weight-sync check (the "
                                  "first training prompts)")
    vllm_sync_probe_tokens: int = _f(32, "with use_vllm: greedy tokens per probe")
    vllm_sync_min_agree: float | None = _f(None, "with use_vllm: stop when fewer probes than this "
                                                 "share complete identically (default: 1.0 in "
                                                 "float32, 0.75 in half precision)")
    vllm_sync_max_logprob_diff: float | None = _f(None, "with use_vllm: stop when the probe "
                                                        "tokens' log-probabilities differ by more "
                                                        "on average (default: 1e-4 in float32, "
                                                        "1e-2 in half precision)")
    vllm_cpu_kvcache_gib: int = _f(1, "with use_vllm on CPU: GiB of memory for vLLM's KV cache "
                                      "(VLLM_CPU_KVCACHE_SPACE, unless set; vLLM's own default "
                                      "takes 90% of the machine's memory)")

    def __post_init__(self):
        errors = []
        if self.label_source not in LABEL_SOURCES:
            errors.append(f"--label_source must be one of {', '.join(LABEL_SOURCES)}, got "
                          f"{self.label_source!r}")
        for flag in ("tasks", "eval_tasks"):
            if getattr(self, flag):  # None or "": the default set, or (eval_tasks) none
                try:
                    find_loader(getattr(self, flag))
                except LoaderError as e:
                    errors.append(f"--{flag}: {e}")
        if self.reward_control not in CONTROLS:
            errors.append(f"--reward_control must be one of {', '.join(CONTROLS)}, got "
                          f"{self.reward_control!r}")
        if self.train_roles not in ROLES_TRAINED:
            errors.append(f"--train_roles must be one of {', '.join(ROLES_TRAINED)}, got "
                          f"{self.train_roles!r}")
        if self.eval_repair_turns is not None and self.eval_repair_turns < 1:
            errors.append(f"--eval_repair_turns must be at least 1, got {self.eval_repair_turns}")
        if self.repair_turns < 1:
            errors.append(f"--repair_turns must be at least 1, got {self.repair_turns}")
        elif self.repair_turns > 1:
            if self.label_source in LABEL_SOURCES and \
                    find_label_source(self.label_source).label_free:
                errors.append("--repair_turns > 1 needs gold tests (label_source gold): "
                              "label-free training in turns is not built")
            if self.length_shaping:
                errors.append("--repair_turns > 1 and --length_shaping: length shaping turns "
                              "rewards into advantages, which repair credit cannot add to")
        if self.repair_turns > 1 or (self.eval_repair_turns or 1) > 1:
            for flag, val, ok in (("repair_feedback", self.repair_feedback, REPAIR_FEEDBACK),
                                  ("repair_credit", self.repair_credit, REPAIR_CREDITS),
                                  ("repair_groups", self.repair_groups, REVISION_GROUPS)):
                if val not in ok:
                    errors.append(f"--{flag} must be one of {', '.join(ok)}, got {val!r}")
            if self.repair_feedback_agreement < 0:
                errors.append(f"--repair_feedback_agreement must be at least 0, got "
                              f"{self.repair_feedback_agreement}")
            if not self.repair_advantage_weight >= 0:
                errors.append(f"--repair_advantage_weight must be at least 0, got "
                              f"{self.repair_advantage_weight}")
            if self.repair_max_failing < 1:
                errors.append(f"--repair_max_failing must be at least 1, got "
                              f"{self.repair_max_failing}")
        if self.reward_weights is not None and len(self.reward_weights) != 1 + len(
                self.reward_funcs or []):
            errors.append(f"--reward_weights needs {1 + len(self.reward_funcs or [])} weights "
                          f"(coevo's, then one per --reward_funcs entry), got "
                          f"{len(self.reward_weights)}")
        if not 0.0 <= self.p_give_example <= 1.0:
            errors.append(f"--p_give_example must be in [0, 1], got {self.p_give_example}")
        for name in ("max_gold_tests", "max_input_examples", "known_wrong"):
            if getattr(self, name) < 0:
                errors.append(f"--{name} must be >= 0, got {getattr(self, name)}")
        for name in ("bon_n", "bon_m", "problems_per_generation", "problems_per_step",
                     "exec_slots", "torch_threads", "tasks_limit", "eval_tasks_limit"):
            v = getattr(self, name)
            if v is not None and v < 1:
                errors.append(f"--{name} must be >= 1, got {v}")
        if self.skip_zero_advantage and (self.beta != 0.0 or self.loss_type != "dapo"):
            errors.append(f"--skip_zero_advantage needs --beta 0 and --loss_type dapo (otherwise a "
                          f"row with zero advantage still moves the loss), got beta={self.beta}, "
                          f"loss_type={self.loss_type!r}")
        problem = check_backend(self.exec_backend, self.exec_address,
                                backend_flag="--exec_backend", address_flag="--exec_address")
        if problem:
            errors.append(problem)
        if self.exec_time_limit_s is not None and not self.exec_time_limit_s > 0:
            errors.append(f"--exec_time_limit_s must be > 0, got {self.exec_time_limit_s}")
        if not 0.0 <= self.max_rows_masked <= 1.0:
            errors.append(f"--max_rows_masked must be in [0, 1], got {self.max_rows_masked}")
        if self.label_judge not in LABEL_JUDGES:
            errors.append(f"--label_judge must be one of {', '.join(LABEL_JUDGES)}, got "
                          f"{self.label_judge!r}")
        elif (self.label_judge != "tests" and self.label_source in LABEL_SOURCES
              and not LABEL_SOURCES[self.label_source].label_free):
            errors.append(f"--label_judge {self.label_judge} is for label-free sources; "
                          f"--label_source {self.label_source} judges by the gold tests")
        if not 0.0 <= self.label_threshold <= 1.0:
            errors.append(f"--label_threshold must be in [0, 1], got {self.label_threshold}")
        lo_hi = list(self.curriculum_window or [])
        if len(lo_hi) != 2 or not 0.0 <= float(lo_hi[0]) <= float(lo_hi[1]) <= 1.0:
            errors.append(f"--curriculum_window must be [low, high] within [0, 1], got "
                          f"{self.curriculum_window}")
        if not self.exchange_timeout_s > 0:
            errors.append(f"--exchange_timeout_s must be > 0, got {self.exchange_timeout_s}")
        if self.early_stopping_patience < 0:
            errors.append(f"--early_stopping_patience must be >= 0, got "
                          f"{self.early_stopping_patience}")
        n_agents = len(self.agent_names)
        if n_agents and self.agent_name not in self.agent_names:
            errors.append(f"--agent_name {self.agent_name!r} is not one of --agent_names "
                          f"{self.agent_names}")
        source = LABEL_SOURCES.get(self.label_source)
        if source and source.min_agents > 1 and n_agents < 2:
            errors.append(f"--label_source {self.label_source} needs a pair or ring of agents: "
                          f"start it with a config that lists `agents:` (see "
                          f"configs/pair-tiny-cpu.yaml)")
        elif source and source.agents_error(max(n_agents, 1)):
            errors.append(f"--{source.agents_error(max(n_agents, 1))}")
        if source and source.needs_frozen and not (self.frozen_labels or self.frozen_model):
            errors.append(f"--label_source {self.label_source} needs --frozen_labels FILE or "
                          f"--frozen_model")
        for name in ("vllm_sync_check_steps", "vllm_sync_probes", "vllm_sync_probe_tokens"):
            if getattr(self, name) < 0:
                errors.append(f"--{name} must be >= 0, got {getattr(self, name)}")
        if self.vllm_sync_min_agree is not None and not 0.0 <= self.vllm_sync_min_agree <= 1.0:
            errors.append(f"--vllm_sync_min_agree must be in [0, 1], got "
                          f"{self.vllm_sync_min_agree}")
        if self.vllm_cpu_kvcache_gib < 1:
            errors.append(f"--vllm_cpu_kvcache_gib must be >= 1, got {self.vllm_cpu_kvcache_gib}")
        if self.min_len > self.max_len:
            errors.append(f"--min_len ({self.min_len}) must not exceed --max_len ({self.max_len})")
        if errors:
            raise ValueError("; ".join(errors))
        if self.length_shaping:
            # CURE's shaped values are advantages already (mean zero); TRL must not rescale them
            self.scale_rewards = "none"
        if self.output_dir is None:
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                raise ValueError("--output_dir is required when several processes train together")
            self.output_dir = os.path.join("runs", time.strftime("coevo-%Y%m%d-%H%M%S"))
        k = self.num_generations
        if self.problems_per_step is not None:  # the old name (configs, resumed runs)
            if self.problems_per_generation not in (None, self.problems_per_step):
                raise ValueError("--problems_per_step is the old name of "
                                 "--problems_per_generation; set only the new one")
            warnings.warn("--problems_per_step is now --problems_per_generation (problems per "
                          "generation batch); the old name still works", FutureWarning,
                          stacklevel=2)
            self.problems_per_generation, self.problems_per_step = self.problems_per_step, None
        if self.problems_per_generation is not None:
            if self.generation_batch_size is not None or self.steps_per_generation is not None:
                raise ValueError("--problems_per_generation sets generation_batch_size; do not "
                                 "also set "
                                 "--generation_batch_size or --steps_per_generation")
            self.generation_batch_size = self.problems_per_generation * 2 * k
        if self.eval_tasks and self.eval_strategy == "no":
            self.eval_strategy = "steps"
        super().__post_init__()
        if self.skip_zero_advantage and self.steps_per_generation != 1:
            raise ValueError(f"--skip_zero_advantage needs one optimiser step per generation "
                             f"batch (steps_per_generation 1, got {self.steps_per_generation}): "
                             f"TRL splits a batch into equal parts")
        if self.generation_batch_size % (2 * k) != 0:
            raise ValueError(
                f"a generation batch holds k={k} code rows then k test rows per problem, so "
                f"generation_batch_size ({self.generation_batch_size}) must be a multiple of "
                f"2k = {2 * k}; set --problems_per_generation instead")
        if self.eval_tasks and self.eval_strategy != "no":
            ke = self.num_generations_eval or k
            if (self.per_device_eval_batch_size * self.world_size) % (2 * ke) != 0:
                raise ValueError(
                    f"every evaluation batch must hold whole problems (k={ke} code rows then k "
                    f"test rows each): per_device_eval_batch_size x processes "
                    f"({self.per_device_eval_batch_size} x {self.world_size}) must be a multiple "
                    f"of {2 * ke}")

    @property
    def problems_per_batch(self) -> int:
        return self.generation_batch_size // (2 * self.num_generations)

    def generation_batches(self, n_problems: int, gradient_accumulation_steps: int | None = None) -> int:
        """How many generation batches the run draws: enough for ``max_steps`` optimiser steps,
        or ``num_train_epochs`` passes over the problems."""
        repeat = self.num_iterations * self.steps_per_generation
        ga = gradient_accumulation_steps or self.gradient_accumulation_steps
        if self.max_steps and self.max_steps > 0:
            return math.ceil(self.max_steps * ga / repeat)
        return max(1, math.ceil(self.num_train_epochs * n_problems / self.problems_per_batch))


# GRPOConfig's own fields that decide the data order, the batch shape and the steps; coevo's are
# declared with ``_lock`` (``lockstep`` in their metadata)
TRL_LOCKSTEP = ("seed", "data_seed", "num_generations", "generation_batch_size", "num_iterations",
                "max_steps", "num_train_epochs", "save_steps", "save_strategy", "eval_steps",
                "eval_strategy", "output_dir", "shuffle_dataset")


def lockstep_fields() -> tuple[str, ...]:
    """The fields every agent of a pair or ring must share (set at the pair config's top level
    only): TRL's :data:`TRL_LOCKSTEP` and coevo's fields marked ``lockstep``."""
    own = tuple(f.name for f in dataclasses.fields(CoevoConfig) if f.metadata.get("lockstep"))
    return TRL_LOCKSTEP + own
