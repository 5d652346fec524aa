"""Every command's options are dataclasses read by one parser (``coevo_code.argv.parse_options``):
``--config FILE`` YAML, then ``--field value``, in one spelling. The flags of the release before
(``--k-code``, ``--slots``, ...) still work, with a warning naming the new spelling; the
defaults are the ones those flags had."""

from __future__ import annotations

import dataclasses
import typing
import warnings

import pytest

from coevo_code.argv import RenamedFlagWarning
from coevo_code.cli import COMMANDS, CLIError, main
from coevo_code.cli.tasks import TasksCommand

COMMAND = {c.name: c for c in COMMANDS}
SANDBOX = ["--slots", "--allow-unsafe", "--launcher", "--no-uid", "--backend", "--address"]
BENCH = ["--release", "--start-date", "--end-date", "--platform", "--livebench-date"]
# every flag of these commands in the release before this one (their argparse parsers)
OLD_FLAGS = {
    "execute": ["--output", "--batch", "--progress", "--quiet", *SANDBOX],
    "doctor": SANDBOX,
    "eval": [*BENCH, "--benchmark", "--data", "--split", "--limit", "--seed", "--samples",
             "--model", "--engine", "--base-url", "--api-key", "--concurrency", "--requests-per-s",
             "--k-code", "--k-test", "--bon", "--rankers", "--temperature", "--top-p",
             "--max-tokens", "--batch-size", "--bootstrap", "--output", "--quiet", *SANDBOX],
    "rank": [*BENCH, "--output", "--ranker", "--benchmark", "--data", "--split", "--tester",
             "--engine", "--base-url", "--api-key", "--k-test", "--max-tokens", "--temperature",
             "--seed", *SANDBOX],
    "tasks check": [*BENCH, "--path", "--split", "--gold-tests", "--strict", "--references",
                    "--no-incorrect", "--limit", "--seed", "--report", "--verbose", "--markdown",
                    "--quiet", *SANDBOX],
    "tasks validate": ["--path", "--output", "--references", "--report", "--quiet", *SANDBOX],
    "serve": ["--host", "--port", "--token", "--problems", "--max-tests", "--tester", "--engine",
              "--k-tests", "--tester-cache", "--temperature", "--max-tokens", "--seed",
              "--max-time-limit", "--max-wall-limit", "--max-memory-mb", "--max-output-mb",
              "--max-cells", "--max-body-mb", "--max-jobs", "--max-response-mb",
              "--queue-response-mb", "--max-reward-items", "--max-query-chars",
              "--max-pending-rewards", "--max-connections", "--tester-max-new",
              "--tester-max-inline", "--queue-cells", "--queue-requests", "--grace", *SANDBOX],
}
# what each command needs to parse at all (a required option, a bare word)
BASE = {"tasks check": ["humaneval"], "tasks validate": ["codecontests", "--path", "p", "-o", "o"]}


def _types(cmd: str) -> tuple:
    if cmd.startswith("tasks "):
        return TasksCommand.SUBCOMMANDS[cmd.split()[1]]
    return COMMAND[cmd].options


def _parse(cmd: str, argv: list[str]) -> dict:
    """Every field the command's options hold, by name; the warnings given."""
    name, *sub = cmd.split()
    command = COMMAND[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if sub:
            parsed = command.parse(sub and argv, TasksCommand.SUBCOMMANDS[sub[0]],
                                   prog=f"coevo {cmd}")
        else:
            parsed = command.parse(argv)
    values = {f.name: getattr(o, f.name) for o in parsed for f in dataclasses.fields(o)}
    return values, [str(w.message) for w in caught if issubclass(w.category, RenamedFlagWarning)]


def _field(cmd: str, flag: str) -> tuple[str, type, dict]:
    from coevo_code.execution.options import OLD_SPELLINGS
    name = OLD_SPELLINGS.get(flag, flag[2:].replace("-", "_"))
    for t in _types(cmd):
        hints = typing.get_type_hints(t)
        for f in dataclasses.fields(t):
            if f.name == name:
                return name, hints[name], f.metadata
    raise AssertionError(f"{cmd}: no field for the old flag {flag}")


def _sample(t, metadata) -> str | None:
    """A value for a field of type ``t`` that is not its default (None: a flag with no value)."""
    if metadata.get("choices"):
        return list(metadata["choices"])[-1]
    if t is bool:
        return None
    if metadata.get("metavar", "").startswith("N"):  # a count, spelt as text (--references)
        return "3"
    base = typing.get_args(t)[0] if typing.get_args(t) else t
    if base is list or typing.get_origin(t) is list:
        return "humaneval"
    return {int: "3", float: "2.5"}.get(base, "x")


@pytest.mark.parametrize("cmd, flag", [(c, f) for c, flags in OLD_FLAGS.items() for f in flags])
def test_an_old_flag_gives_the_new_ones_value_and_a_warning_naming_it(cmd, flag):
    name, t, metadata = _field(cmd, flag)
    value = "ray" if name == "exec_backend" else _sample(t, metadata)  # a registry name
    old = [flag] + ([value] if value is not None else [])
    new = [f"--{name}"] + ([value] if value is not None else [])
    base = BASE.get(cmd, []) + (["--exec_backend", "ray"] if name == "exec_address" else [])
    before, quiet = _parse(cmd, base)
    old_values, warned = _parse(cmd, base + old)
    new_values, unwarned = _parse(cmd, base + new)
    assert old_values == new_values
    assert old_values[name] != before[name]  # the flag did set something
    assert quiet == [] and unwarned == []
    if flag == f"--{name}":  # the same spelling as before (--seed, --quiet, --bon)
        assert warned == []
    else:
        assert warned == [f"coevo {cmd}: {flag} is now --{name} (the old spelling works until "
                          f"the next release)"]


def test_short_flags_and_bare_words_are_no_old_spelling():
    values, warned = _parse("execute", ["jobs.jsonl", "-o", "-", "-q"])
    assert (values["jobs"], values["output"], values["quiet"]) == ("jobs.jsonl", "-", True)
    assert warned == []
    values, warned = _parse("tasks check", ["codeforces", "--config", "verifiable", "-v"])
    assert values["dataset_config"] == "verifiable" and values["verbose"] is True
    assert warned == ["coevo tasks check: --config default|verifiable is now --dataset_config "
                      "(the old spelling works until the next release)"]


def test_a_bool_flag_does_not_take_the_next_bare_word():
    values, _ = _parse("tasks check", ["--no_incorrect", "humaneval", "--strict", "false"])
    assert (values["name"], values["no_incorrect"], values["strict"]) == ("humaneval", True, False)


def test_a_repeated_list_flag_adds_to_it():
    values, _ = _parse("serve", ["--problems", "a=1", "--problems", "b", "c"])
    assert values["problems"] == ["a=1", "b", "c"]


# the defaults of the release before, flag by flag (its argparse parsers)
OLD_DEFAULTS = {
    "execute": dict(output="runs/execute/matrices.jsonl", batch=256, progress=False, quiet=False),
    "eval": dict(seed=0, engine="transformers", concurrency=8, k_code=16, k_test=16,
                 bon="4x4,16x16", rankers="cure,codet,first", temperature=1.0, top_p=1.0,
                 max_tokens=1024, batch_size=8, bootstrap=1000, quiet=False, limit=None,
                 requests_per_s=None, model=None, samples=None),
    "rank": dict(output="-", ranker="cure", engine="transformers", k_test=8, max_tokens=1024,
                 temperature=1.0, seed=0, tester=None),
    "tasks check": dict(references=None, no_incorrect=False, limit=None, seed=0, verbose=False,
                        markdown=False, strict=False, quiet=False, dataset_config=None),
    "serve": dict(host="127.0.0.1", port=8080, problems=[], max_tests=None, tester=None,
                  engine="transformers", k_tests=8, tester_cache=None, temperature=1.0,
                  max_tokens=512, seed=0, max_time_limit=10.0, max_wall_limit=30.0,
                  max_memory_mb=2048, max_output_mb=16.0, max_cells=100_000, max_body_mb=32.0,
                  max_jobs=4096, max_response_mb=64.0, queue_response_mb=512.0,
                  max_reward_items=4096, max_query_chars=1 << 20, max_pending_rewards=256,
                  # 1,024 until issue 51: it must hold a rollout's reward requests in flight
                  max_connections=8192, tester_max_new=8, tester_max_inline=1024,
                  queue_cells=1_000_000, queue_requests=1024, grace=30.0),
}
EXECUTION_DEFAULTS = dict(exec_slots=None, exec_allow_unsafe=False, exec_launcher="auto",
                          exec_no_uid=False, exec_backend="local", exec_address=None)


@pytest.mark.parametrize("cmd", sorted(OLD_DEFAULTS))
def test_the_defaults_are_the_old_flags_defaults(cmd, monkeypatch):
    monkeypatch.delenv("COEVO_SERVE_TOKEN", raising=False)
    values, _ = _parse(cmd, BASE.get(cmd, []))
    want = {**OLD_DEFAULTS[cmd], **EXECUTION_DEFAULTS}
    assert {k: values[k] for k in want} == want


def test_a_config_file_sets_options_and_the_command_line_wins(tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("k_code: 4\nk_test: 3\nexec_slots: 2\nbenchmark: humaneval\ntop_p: 0.5\n"
                   "quiet: true\nexec_allow_unsafe: false\nlimit: null\n")
    values, warned = _parse("eval", ["--config", str(cfg), "--k_test", "5"])
    assert (values["k_code"], values["k_test"], values["exec_slots"], values["top_p"],
            values["benchmark"], values["quiet"], values["exec_allow_unsafe"],
            values["limit"]) == (4, 5, 2, 0.5, "humaneval", True, False, None)
    assert warned == []
    srv = tmp_path / "serve.yaml"
    srv.write_text("problems: [a, b=p]\nmax_body_mb: 1.5\n")
    values, _ = _parse("serve", ["--config", str(srv), "--problems", "c"])
    assert values["problems"] == ["c"] and values["max_body_mb"] == 1.5  # the command line wins
    values, _ = _parse("serve", ["--config", str(srv)])
    assert values["problems"] == ["a", "b=p"]
    cfg.write_text("k-code: 4\nslots: 2\n")  # the keys the old overlay took
    values, warned = _parse("eval", ["--config", str(cfg)])
    assert (values["k_code"], values["exec_slots"]) == (4, 2)
    assert warned == [f"coevo eval: 'k-code' in {cfg} is now --k_code (the old spelling works "
                      f"until the next release)",
                      f"coevo eval: 'slots' in {cfg} is now --exec_slots (the old spelling works "
                      f"until the next release)"]


@pytest.mark.parametrize("text, msg", [
    ("k_cod: 4\n", "unknown field k_cod in"),
    ("- 1\n- 2\n", "must hold a mapping of field: value"),
    ("a: [\n", "not valid YAML"),
    ("k_code: many\n", "argument --k_code: invalid int value: 'many'"),
    ("engine: gpt\n", "argument --engine: invalid choice: 'gpt'"),
    ("k_test: -1\n", "--k_test must be >= 0, got -1"),
])
def test_a_bad_config_file_is_one_line_naming_it(tmp_path, text, msg):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(CLIError, match=msg) as e:
        _parse("eval", ["--config", str(cfg)])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("cmd, argv, msg", [
    ("eval", ["--k_cod", "3"], "unknown flag --k_cod (see `coevo eval --help`)"),
    ("eval", ["--k_code", "three"], "argument --k_code: invalid int value: 'three'"),
    ("eval", ["--engine", "gpt"], "argument --engine: invalid choice: 'gpt'"),
    ("eval", ["--batch_size", "0"], "--batch_size must be >= 1, got 0"),
    ("execute", ["a.jsonl", "b.jsonl"], "unexpected argument 'b.jsonl'"),
    ("execute", ["-x"], "unknown flag -x"),
    ("serve", ["--grace", "0"], "--grace must be > 0"),
    ("serve", ["--k-tests", "0"], "--k_tests must be >= 1"),
    ("tasks validate", ["codecontests", "--path", "p"], "--output is required"),
    ("doctor", ["--exec_backend", "slurm"], "unknown executor backend 'slurm' (--exec_backend); choose from local, ray"),
])
def test_a_bad_flag_is_one_line_naming_it(cmd, argv, msg):
    with pytest.raises(CLIError) as e:
        _parse(cmd, argv)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_help_lists_every_field_with_its_help(capsys):
    assert main(["eval", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--k-code" not in out  # one spelling
    for flag, text in (("--k_code", "solutions per problem"), ("--exec_slots", "sandbox slots"),
                       ("--top_p", "nucleus sampling"), ("--release", "livecodebench"),
                       ("--config FILE", "the command line wins")):
        assert flag in out and text in out


def test_the_training_config_is_the_execution_and_reward_options():
    """One declaration of each field: the training config composes the execution options and
    the reward options (their defaults and help are the config's)."""
    from coevo_code.execution.options import ExecutionOptions
    from coevo_code.training.config import CoevoConfig
    from coevo_code.training.scoring import RewardOptions
    assert issubclass(CoevoConfig, ExecutionOptions) and issubclass(CoevoConfig, RewardOptions)
    own = set(CoevoConfig.__dict__["__annotations__"])
    assert not own & {f.name for f in dataclasses.fields(ExecutionOptions)}
    assert not own & {f.name for f in dataclasses.fields(RewardOptions)}
    assert RewardOptions() == RewardOptions(max_gold_tests=8, post_stage=False,
                                            wrong_programs_only=True, known_wrong=0,
                                            code_all_passed=False, length_shaping=False,
                                            min_len=1000, max_len=8000, bon_n=4, bon_m=4,
                                            label_source="gold", label_threshold=0.5,
                                            label_judge="tests")


def test_coevo_train_reads_the_same_execution_options():
    """``coevo train --exec_no_uid --exec_slots 3``: the training config's execution fields are
    the ones every other command takes, and the executor the step opens gets them."""
    from coevo_code.training.cli import parse_train_args
    from coevo_code.training.run import reward_options
    a = parse_train_args(["--exec_slots", "3", "--exec_no_uid", "--max_gold_tests", "5",
                          "--known_wrong", "3"])
    assert a.config.executor_options() == {"backend": "local", "address": None, "slots": 3,
                                           "launcher": "auto", "allow_unsafe": False,
                                           "use_uid": False}
    assert reward_options(a.config).max_gold_tests == 5
    assert reward_options(a.config).known_wrong == 3
    assert a.inputs["exec_no_uid"] is True and a.inputs["exec_slots"] == 3


def test_argparse_forms_of_short_and_list_flags():
    """What argparse read before the one parser: joined short flags (-qv), a short flag's value
    joined (-oOUT, -o=OUT), a list flag repeated with = (every value kept)."""
    values, warned = _parse("tasks check", ["humaneval", "-qv"])
    assert (values["quiet"], values["verbose"]) == (True, True) and warned == []
    for form in (["-oOUT"], ["-o=OUT"], ["-o", "OUT"]):
        values, _ = _parse("execute", ["jobs.jsonl", *form])
        assert values["output"] == "OUT", form
    values, _ = _parse("serve", ["--problems=humaneval", "--problems=mbpp"])
    assert values["problems"] == ["humaneval", "mbpp"]
    values, _ = _parse("serve", ["--problems", "humaneval", "--problems=mbpp"])
    assert values["problems"] == ["humaneval", "mbpp"]
    with pytest.raises(Exception, match="unknown flag -qz"):
        _parse("tasks check", ["humaneval", "-qz"])
