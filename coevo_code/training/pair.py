"""Pairs and rings (Co-RL): ``coevo train --config PAIR.yaml`` starts one trainer process per agent.

A pair config is a training config with an ``agents:`` list. Top-level fields are shared; each
agent has a ``name``, its own fields (its model, learning rate, ``problem_field``, ...) and an
optional ``launch:`` block (``num_processes``: processes of its own world, started by
``torchrun``, or by ``accelerate launch`` with ``accelerate_config`` (DeepSpeed, FSDP) on a port of
its own; ``devices``: its ``CUDA_VISIBLE_DEVICES``; ``env``: extra environment variables)::

    label_source: partner
    tasks: bundled
    agents:
      - name: qwen
        model_name_or_path: tiny-random
      - name: llama
        model_name_or_path: tiny-llama-random
        learning_rate: 5.0e-4

The launcher writes one run directory: ``config.yaml`` (the pair's inputs) and a subfolder per
agent (that agent's ``config.yaml``, ``metrics.jsonl``, checkpoints, ``agent.log``). It hosts the
``TCPStore`` the agents swap completions through (``exchange.py``), starts every agent as
``coevo train --config DIR/<agent>/config.yaml`` (no shared parameters, gradients or devices: the
reward is the only coupling), shows one progress bar per agent, and marks an agent that exits in
the store, so that the others stop at once with an error naming it (a stalled agent is caught by
``exchange_timeout_s``). Agents die with the launcher (``PR_SET_PDEATHSIG``).

Fields that decide the data order, the batch shape and the steps (``config.lockstep_fields()``,
declared with the config's fields) must be the same for every agent, so they are set at the top
level only. An agent may split its batch its own
way (``per_device_train_batch_size``, ``gradient_accumulation_steps``, processes) as long as every
agent's optimiser step takes the same rows (checked before anything starts). ``coevo train --resume DIR`` restarts
every agent from the last step all of them have a complete checkpoint for: later checkpoints are
set aside and later metrics lines dropped, so every step of every agent is logged exactly once.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..argv import flag_pairs
from .rundir import checkpoint_step, checkpoints, set_aside

LAUNCH_KEYS = ("num_processes", "devices", "env", "accelerate_config")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PairError(ValueError):
    """A pair config that cannot run; the message names the agent or field."""


@dataclass
class Agent:
    name: str
    fields: dict
    launch: dict = field(default_factory=dict)


@dataclass
class Pair:
    output_dir: Path
    inputs: dict          # the pair's config.yaml
    agents: list[Agent]
    timeout_s: float


def is_pair_config(path) -> bool:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "agents" in data


def _overrides(argv: list[str]) -> dict:
    """``--field value`` / ``--field=value`` pairs (values read as YAML scalars), applied to
    every agent; a flag with no value is true."""
    try:
        pairs = flag_pairs(argv)
    except ValueError as e:
        raise PairError(str(e)) from None
    return {name: "" if value == "" else yaml.safe_load("true" if value is None else value)
            for name, value in pairs}


def load_pair(config_file: str, argv: list[str], smoke: bool = False) -> Pair:
    """Read a pair config (plus command-line overrides for every agent) into agent configs;
    ``smoke``: shrunk to run here first (:func:`.smoke.apply_pair`), the overrides still win."""
    try:
        base = yaml.safe_load(Path(config_file).read_text()) or {}
    except yaml.YAMLError as e:
        raise PairError(f"--config {config_file}: not valid YAML ({str(e).splitlines()[0]})")
    agents = base.get("agents")
    if not isinstance(agents, list) or not agents:
        raise PairError(f"--config {config_file}: `agents:` must list the agents")
    over = _overrides(argv)
    if smoke:
        from .smoke import apply_pair
        base = apply_pair(base, given=over)
        agents = base["agents"]
    common = {k: v for k, v in base.items() if k != "agents"}
    common.update(over)
    out = Path(common.get("output_dir") or os.path.join(
        "runs", time.strftime("pair-%Y%m%d-%H%M%S")))
    names = []
    specs = []
    for i, a in enumerate(agents):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise PairError(f"--config {config_file}: agent #{i + 1} needs a `name:`")
        name = a["name"]
        if not NAME.match(name) or name in names:
            raise PairError(f"--config {config_file}: agent name {name!r} must be unique and "
                            f"made of letters, digits, '.', '_', '-'")
        names.append(name)
        own = {k: v for k, v in a.items() if k not in ("name", "launch")}
        from .config import lockstep_fields  # the config needs trl: imported when used
        clash = sorted(set(own) & set(lockstep_fields()))
        if clash:
            raise PairError(f"agent {name!r} sets {', '.join(clash)}: every agent must share it "
                            f"(the data order, batch shape and steps stay in lockstep); set it at "
                            f"the top level")
        launch = dict(a.get("launch") or {})
        bad = sorted(set(launch) - set(LAUNCH_KEYS))
        if bad:
            raise PairError(f"agent {name!r}: unknown launch key(s) {', '.join(bad)} (known: "
                            f"{', '.join(LAUNCH_KEYS)})")
        specs.append(Agent(name, {**common, **own}, launch))
    if len(specs) < 2:
        raise PairError(f"--config {config_file}: a pair or ring needs at least 2 agents")
    for s in specs:
        s.fields.update(output_dir=str(out / s.name), agent_name=s.name, agent_names=names)
    inputs = {**base, **over, "output_dir": str(out)}
    return Pair(out, inputs, specs, float(common.get("exchange_timeout_s", 600.0)))


def _agent_env(a: Agent, extra: dict | None = None) -> dict:
    env = dict(os.environ, **(extra or {}))
    env.update({str(k): str(v) for k, v in (a.launch.get("env") or {}).items()})
    if a.launch.get("devices") is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(a.launch["devices"])
    return env


def validate(pair: Pair) -> None:
    """Parse every agent's config as its process will (in a process of its own, with its
    environment and devices: the launcher itself never imports TRL or touches a GPU); check that
    every agent's optimiser step takes the same rows."""
    import json
    import tempfile
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        for a in pair.agents:
            f = Path(tmp) / f"{a.name}.yaml"
            f.write_text(yaml.safe_dump(a.fields, sort_keys=False))
            procs[a.name] = (a, f, subprocess.Popen(
                [sys.executable, "-m", "coevo_code.training.pair", "--check", str(f)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_agent_env(a)))
        for name, (a, f, p) in procs.items():
            out, err = p.communicate()
            if p.returncode != 0:
                lines = ([x for x in out.splitlines() if x.strip()]  # the one-line reason
                         or [x for x in err.splitlines() if x.strip()])  # or how it died
                why = lines[-1] if lines else f"exit {p.returncode}"
                raise PairError(f"agent {name!r}: {why}".replace(f"--config {f}: ", ""))
            got = json.loads(out.strip().splitlines()[-1])
            n = int(a.launch.get("num_processes", 1))
            rows[name] = (got["per_device"] * n * got["accumulation"],
                          f"{got['per_device']} x {n} process(es) x {got['accumulation']}")
    layouts = {how for _, how in rows.values()}
    if pair.agents[0].fields.get("curriculum") and len(layouts) > 1:
        raise PairError("with the curriculum on, every agent must split its batch the same way "
                        "(its samplers read the shared estimates at the same moments): " +
                        ", ".join(f"{n} {how}" for n, (_, how) in rows.items()))
    if len({r for r, _ in rows.values()}) > 1:
        raise PairError("agents must take the same rows per optimiser step (per_device_train_"
                        "batch_size x processes x gradient_accumulation_steps): " + ", ".join(
                            f"{n} {r} ({how})" for n, (r, how) in rows.items()))


# ---- resume -------------------------------------------------------------------------------------
def align_checkpoints(out: Path, names: list[str]) -> int:
    """The last step every agent has a complete checkpoint for (0: none); every later checkpoint
    is set aside, so each agent's own resume starts from that step."""
    steps = []
    for n in names:
        have = {checkpoint_step(p) for _, p in checkpoints(out / n)}
        steps.append({s for s in have if s is not None})
    common = set.intersection(*steps) if steps else set()
    last = max(common, default=0)
    for n in names:
        later = [p for step, p in checkpoints(out / n) if step > last]
        for p in set_aside(sorted(later)):
            print(f"coevo: {n}/{p.name}: beyond step {last}, the last step every agent saved; "
                  f"set aside", file=sys.stderr)
    return last


# ---- launch -------------------------------------------------------------------------------------
def _die_with_parent():
    """In the child: receive SIGTERM when the launcher dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    """A TCP port on 127.0.0.1 the system chose as free (for a rendezvous)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(a: Agent, resume: bool) -> list[str]:
    n = int(a.launch.get("num_processes", 1))
    target = ["-m", "coevo_code.cli", "train"]
    args = (["--resume", a.fields["output_dir"]] if resume
            else ["--config", str(Path(a.fields["output_dir"]) / "config.yaml")])
    if a.launch.get("accelerate_config"):
        return [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(a.launch["accelerate_config"]), "--num_processes", str(n),
                "--main_process_port", str(free_port())] + target + args
    if n > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node", str(n)] + target + args
    return [sys.executable] + target + args


def _last_words(log: Path) -> str:
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    for x in reversed(lines):
        if x.startswith("coevo:") or "Error" in x:
            return x[:300]
    return lines[-1][:300] if lines else "empty log"


def _stalled(words: str, names) -> str | None:
    """The agent a partner's last words say went silent past the timeout (exchange.py's
    message), if it is one of ``names``."""
    m = re.search(r"agent '([^']+)' sent nothing", words)
    return m.group(1) if m and m.group(1) in names else None


def _steps_done(path: Path) -> int:
    """Lines in an agent's metrics.jsonl (one per step), counted without parsing them."""
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def launch(pair: Pair, resume: bool = False, poll_s: float = 0.5) -> int:
    """Check the agents' configs (:func:`validate`), then run every agent to the end; returns the
    exit code (0: all finished)."""
    from tqdm import tqdm

    from .exchange import host_store
    from .rundir import refuse_existing_run

    out = pair.output_dir
    names = [a.name for a in pair.agents]
    if not resume:
        for a in pair.agents:
            refuse_existing_run(out / a.name)
    validate(pair)
    if resume:
        step = align_checkpoints(out, names)
        print(f"coevo: resuming {', '.join(names)} from step {step}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(pair.inputs, sort_keys=False))
    for a in pair.agents:
        d = out / a.name
        d.mkdir(exist_ok=True)
        (d / "config.yaml").write_text(yaml.safe_dump(a.fields, sort_keys=False))

    store = host_store()
    procs: dict[str, subprocess.Popen] = {}
    logs = {}
    for a in pair.agents:
        extra = {"COEVO_EXCHANGE": f"127.0.0.1:{store.port}"}
        if int(a.launch.get("num_processes", 1)) == 1 and not a.launch.get("accelerate_config"):
            # a port of its own for the rendezvous of a one-process agent's colocated vLLM
            # (TRL's choice prefers 29500 when it looks free: agents started together both
            # took it, and the second failed with EADDRINUSE); torchrun and accelerate set
            # their own
            extra["MASTER_PORT"] = str(free_port())
        env = _agent_env(a, extra)
        logs[a.name] = out / a.name / "agent.log"
        with open(logs[a.name], "a") as log:
            procs[a.name] = subprocess.Popen(_command(a, resume), stdout=log,
                                             stderr=subprocess.STDOUT, env=env,
                                             preexec_fn=_die_with_parent)
    (out / "launcher.pid").write_text(f"{os.getpid()}\n" + "".join(
        f"{n} {p.pid}\n" for n, p in procs.items()))
    total = pair.agents[0].fields.get("max_steps")
    bars = {n: tqdm(total=total if isinstance(total, int) and total > 0 else None, desc=n,
                    position=i, leave=True, unit="step", file=sys.stderr)
            for i, n in enumerate(names)}
    codes: dict[str, int] = {}
    first_failure = None
    deadline = None
    killing = False
    try:
        while len(codes) < len(procs):
            for n, p in procs.items():
                if n in codes:
                    continue
                rc = p.poll()
                done = _steps_done(out / n / "metrics.jsonl")
                bars[n].update(done - bars[n].n)
                if rc is None:
                    continue
                codes[n] = rc
                try:
                    store.set(f"exit/{n}", str(rc))
                except Exception:  # noqa: BLE001 - the store is ours; never fails in practice
                    pass
                if rc != 0 and first_failure is None:
                    first_failure = n
                    deadline = time.monotonic() + pair.timeout_s + 60
                    silent = _stalled(_last_words(logs[n]), set(procs) - set(codes))
                    if silent:
                        procs[silent].kill()  # silent past the timeout already: no grace
            if deadline is not None and time.monotonic() > deadline:
                # an agent still running long after another failed: stalled (its partners time
                # out on it); SIGTERM, then SIGKILL (a stopped process ignores SIGTERM)
                for n, p in procs.items():
                    if n in codes:
                        continue
                    if killing:
                        p.kill()
                    else:
                        p.terminate()
                deadline = time.monotonic() + 15 if not killing else None
                killing = True
            time.sleep(poll_s)
    except KeyboardInterrupt:
        for p in procs.values():
            p.send_signal(signal.SIGINT)
        for p in procs.values():
            p.wait()
        raise
    finally:
        for b in bars.values():
            b.close()
    if first_failure is None:
        print(f"coevo: {', '.join(names)} finished; run directory {out}; curves: "
              f"coevo report {out}", file=sys.stderr)
        return 0
    words = _last_words(logs[first_failure])
    culprit = _stalled(words, procs)  # the first to exit may only have noticed the culprit
    if culprit:
        print(f"coevo: agent {culprit!r} stalled ({words}); it was stopped (log: "
              f"{logs[culprit]})", file=sys.stderr)
    else:
        culprit = first_failure
        print(f"coevo: agent {first_failure!r} failed (exit {codes[first_failure]}): {words} "
              f"(log: {logs[first_failure]})", file=sys.stderr)
    for n in names:
        if n != culprit and codes.get(n):
            print(f"coevo: agent {n!r} stopped (exit {codes[n]}): {_last_words(logs[n])}",
                  file=sys.stderr)
    return 1


def _check(path: str) -> int:
    """``python -m coevo_code.training.pair --check AGENT.yaml``: parse one agent's config as
    ``coevo train`` will; print its batch layout as JSON, or the one-line reason it is refused."""
    import json

    from .cli import parse_train_args
    try:
        c = parse_train_args(["--config", path]).config
    except (ValueError, FileNotFoundError) as e:
        print(str(e).splitlines()[0] if str(e) else type(e).__name__)
        return 2
    print(json.dumps({"per_device": c.per_device_train_batch_size,
                      "accumulation": c.gradient_accumulation_steps}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(_check(sys.argv[2]))
    sys.exit("usage: python -m coevo_code.training.pair --check AGENT.yaml")
