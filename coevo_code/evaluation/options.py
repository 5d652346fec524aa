"""The options of ``coevo eval`` and ``coevo rank`` (and the benchmark selection ``coevo tasks``
shares), as dataclasses: each field is a ``--field`` of the command (its help is the field's
``help``) or a key of its ``--config`` YAML. The commands compose them with
:class:`~coevo_code.generation.options.GenerationOptions` and
:class:`~coevo_code.execution.options.ExecutionOptions` (``coevo_code/cli/evaluate.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..argv import option


@dataclass
class BenchmarkOptions:
    """Which problems of a benchmark: LiveCodeBench's release and contest window, LiveBench's
    date (the training config's ``tasks_release``, ``tasks_start_date``... for its data)."""

    release: str | None = option(None, "livecodebench: release_v1 ... release_v6 (cumulative), "
                                       "release_latest (default), or v1 ... v6 (one release)")
    start_date: str | None = option(None, "livecodebench: first contest date kept (YYYY-MM-DD)")
    end_date: str | None = option(None, "livecodebench: last contest date kept (YYYY-MM-DD)")
    platform: str | None = option(None, "livecodebench: leetcode, atcoder and/or codeforces "
                                        "(comma-separated)")
    livebench_date: str | None = option(None, "livebench: questions as of this date (default "
                                              "today): removed ones are left out")
    examples: int | None = option(None, "world: this many of each problem's gold tests become "
                                        "its public examples (the rest judge)")
    strict: bool = option(False, "a row the loader cannot use (unreadable, malformed, tests no "
                                 "program can read, interactive) ends the load with its one-line "
                                 "error (default: skipped and counted in the load report)")

    def loader_options(self) -> dict:
        """The loader options these set (only those given; ``strict`` only when true)."""
        return {k: v for k, v in vars(self).items() if v not in (None, "", False)}


def _at_least(obj, names: tuple[str, ...], least: int = 1) -> None:
    for name in names:
        v = getattr(obj, name)
        if v is not None and v < least:
            raise ValueError(f"--{name} must be >= {least}, got {v}")


@dataclass
class EvalOptions:
    """``coevo eval``: what to evaluate, how many solutions and tests, and where results go."""

    benchmark: str | None = option(None, "a dataset name (see `coevo tasks check`); required")
    data: str | None = option(None, "a local copy of the benchmark (default: its public source)")
    split: str | None = option(None, "dataset split")
    limit: int | None = option(None, "a seeded sample of this many problems")
    seed: int = option(0, "seed of the sample, the sampling and the bootstrap")
    samples: str | None = option(None, "score this JSONL of solutions (evalplus format: task_id "
                                       "plus solution or completion) instead of generating")
    model: str | None = option(None, "local path or hub id (or `tiny`); with --engine openai: "
                                     "the served model's name")
    k_code: int = option(16, "solutions per problem")
    k_test: int = option(16, "unit tests per problem")
    bon: str = option("4x4,16x16", "best-of-N settings NxM, comma-separated")
    rankers: str = option("cure,codet,first", "comma-separated: cure, codet, codet_sqrt, first")
    bootstrap: int = option(1000, "bootstrap resamples for the CIs")
    output: str | None = option(None, "output directory; required", aliases=["-o"])
    quiet: bool = option(False, "no progress bars", aliases=["-q"])
    hide_examples: bool = option(False, "prompts without the public examples (CURE's "
                                        "eval_no_example); public repair feedback still uses "
                                        "them")
    repair_turns: int = option(1, "turns per solution: a solution that fails its "
                                  "feedback tests is revised, shown at most 2 failing ones, up to "
                                  "this many turns in all; 1 (default): one attempt, as ever")
    feedback_tests: str = option("public", "what a solution is checked against between repair "
                                           "turns: public (the benchmark's examples), self "
                                           "(the model's own generated tests of that problem) "
                                           "or tester:MODEL (k_test tests of each problem "
                                           "written by another model, e.g. a trained tester)")
    feedback_agreement: int = option(0, "show only the feedback tests that at least this many of "
                                        "the problem's first-turn solutions pass (CodeT's "
                                        "agreement); 0 (default): all of them")

    def __post_init__(self):
        _at_least(self, ("k_code", "limit", "repair_turns"))
        _at_least(self, ("k_test", "feedback_agreement"), 0)
        if self.feedback_tests.startswith("tester:"):
            if not self.feedback_tests[len("tester:"):].strip():
                raise ValueError("--feedback_tests tester:MODEL needs a model after 'tester:'")
        elif self.feedback_tests not in ("public", "self"):
            raise ValueError(f"--feedback_tests must be public, self or tester:MODEL, got "
                             f"{self.feedback_tests!r}")


@dataclass
class RankOptions:
    """``coevo rank``: the records, the ranker and (with a tester) the tests to write."""

    input: str | None = option(None, "JSONL: {id, kind, solutions, tests} per line (see docs); "
                                     "- for stdin; also the first bare word")
    output: str = option("-", "JSONL out (default: stdout)", aliases=["-o"])
    ranker: str = option("cure", "cure, codet, codet_sqrt, mbr or first")
    benchmark: str | None = option(None, "problems by task_id from this dataset")
    data: str | None = option(None, "a local copy of the benchmark")
    split: str | None = option(None, "dataset split")
    tester: str | None = option(None, "a tester model writing the tests (with --benchmark)")
    k_test: int = option(8, "unit tests the tester writes per problem")
    seed: int = option(0, "sampling seed")

    def __post_init__(self):
        _at_least(self, ("k_test",), 0)
