"""The trainers' own client code against a running ``coevo serve``: veRL's SandboxFusion reward
helper and OpenRLHF's single-turn agent executor, driven with many concurrent requests whose
right rewards are known (loopback only, bounded in count and time).

Both are loaded from their installed files without importing their packages (``import verl``
pulls ray and tensordict in, ``import openrlhf`` deepspeed and transformers; the reward code
itself needs only ``requests`` and ``aiohttp``): ``pip install --no-deps verl==0.9.1
openrlhf==0.11.2`` is enough. ``COEVO_VERL_DIR`` / ``COEVO_OPENRLHF_DIR`` name a source tree's
package folder instead.

- :func:`drive_verl`: ``compute_score`` of ``verl/utils/reward_score/sandbox_fusion`` (what
  ``default_compute_score`` calls for ``codecontests``, ``apps``, ``codeforces``, ``taco``) for
  ``completions`` stdio completions of ``tests`` tests each, every test one ``/run_code``
  request, at most ``concurrency`` in flight (veRL's ``concurrent_semaphore``);
- :func:`drive_openrlhf`: ``SingleTurnAgentExecutor.execute`` (``openrlhf/utils/agent.py``) for
  ``samples`` samples, ``concurrency`` at once, each posting one ``/reward`` request, with a
  character tokenizer and an engine that answers each prompt with its completion (what is under
  test is the reward request and how the client treats its answer, not generation).

Each returns the rewards, the right ones, and the counts: wrong (a reward that is not the right
one), errors (veRL: a test the helper marked ``api_error``, which it scores as failed; OpenRLHF:
a reward that came back ``None``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import json
import os
import sys
import threading
import time
import types
from pathlib import Path
from urllib.parse import urlparse

from .server import is_loopback


def _package_dir(name: str, env: str) -> Path | None:
    root = os.environ.get(env)
    if not root:
        try:
            spec = importlib.util.find_spec(name)   # finds the package without importing it
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            return None
        root = list(spec.submodule_search_locations)[0]
    return Path(root)


def load_verl_sandbox_fusion():
    """veRL's ``verl/utils/reward_score/sandbox_fusion`` package, or None where veRL is absent."""
    if "verl_sandbox_fusion" in sys.modules:
        return sys.modules["verl_sandbox_fusion"]
    root = _package_dir("verl", "COEVO_VERL_DIR")
    pkg = root / "utils" / "reward_score" / "sandbox_fusion" if root else None
    if pkg is None or not (pkg / "__init__.py").is_file():
        return None
    spec = importlib.util.spec_from_file_location(
        "verl_sandbox_fusion", pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["verl_sandbox_fusion"] = mod
    spec.loader.exec_module(mod)
    return mod


def load_openrlhf_agent():
    """OpenRLHF's ``openrlhf/utils/agent.py`` (and the ``logging_utils`` it imports), or None
    where OpenRLHF is absent. The packages ``openrlhf`` and ``openrlhf.utils`` are entered as
    bare namespaces over their real folders, so that their ``__init__`` (deepspeed,
    transformers) does not run; every module loaded is OpenRLHF's own file."""
    name = "openrlhf.utils.agent"
    if name in sys.modules:
        return sys.modules[name]
    root = _package_dir("openrlhf", "COEVO_OPENRLHF_DIR")
    if root is None or not (root / "utils" / "agent.py").is_file():
        return None
    if "openrlhf" not in sys.modules:
        for pkg, path in (("openrlhf", root), ("openrlhf.utils", root / "utils")):
            mod = types.ModuleType(pkg)
            mod.__path__ = [str(path)]
            sys.modules[pkg] = mod
    spec = importlib.util.spec_from_file_location(name, root / "utils" / "agent.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _check_loopback(url: str) -> None:
    host = urlparse(url).hostname or ""
    if not is_loopback(host):
        raise ValueError(f"the trainer clients are driven against a loopback server only, not "
                         f"{host!r}")


# a stdio problem (a + b) and completions that get a known share of its tests right
def _problem(tests: int, seed: int) -> list[tuple[int, int]]:
    return [((seed * 7 + i * 3) % 11 - 5, (seed * 5 + i) % 4) for i in range(tests)]


_KINDS = [
    ("right", "a, b = map(int, input().split())\nprint(a + b)", lambda a, b: True),
    ("minus", "a, b = map(int, input().split())\nprint(a - b)", lambda a, b: b == 0),
    ("pos", "a, b = map(int, input().split())\nprint(a + b if a >= 0 else 0)",
     lambda a, b: a >= 0 or a + b == 0),
    ("crash", "a, b = map(int, input().split())\nprint(a // b + b * 0 + a - a // b + b)",
     lambda a, b: b != 0),
]


def _completion(i: int) -> tuple[str, object]:
    _, code, ok = _KINDS[i % len(_KINDS)]
    # every program text distinct (the executor runs copies of one text only once)
    return f"Here it is.\n```python\n{code}  # sample {i}\n```", ok


def drive_verl(url: str, completions: int = 32, tests: int = 4, concurrency: int = 64,
               memory_limit_mb: int = 512, timeout: int = 10) -> dict:
    """veRL's ``compute_score`` (``continuous=True``, as ``default_compute_score`` calls it) for
    ``completions`` completions at once, ``tests`` tests each: ``completions * tests``
    ``/run_code`` requests, at most ``concurrency`` in flight. ``url`` ends in ``/run_code``."""
    _check_loopback(url)
    sf = load_verl_sandbox_fusion()
    if sf is None:
        raise RuntimeError("veRL is not installed (pip install --no-deps verl==0.9.1) and "
                           "COEVO_VERL_DIR is not set")
    import logging
    # its error lines (one per failed request): counted below instead
    logging.getLogger("verl_sandbox_fusion").setLevel(logging.CRITICAL)
    semaphore = threading.Semaphore(concurrency)

    def one(i: int):
        text, ok = _completion(i)
        cases = _problem(tests, i)
        gt = json.dumps({"inputs": [f"{a} {b}\n" for a, b in cases],
                         "outputs": [f"{a + b}\n" for a, b in cases]})
        n = min(len(cases), 10)
        right = sum(1 for a, b in cases[:n] if ok(a, b)) / n
        score, meta = sf.compute_score(url, semaphore, memory_limit_mb, text, gt,
                                       continuous=True, timeout=timeout)
        return score, right, [m.get("status") for m in meta]

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=completions) as pool:
        out = list(pool.map(one, range(completions)))
    statuses = [s for _, _, st in out for s in st]
    return {"client": "verl 0.9.1 sandbox_fusion.compute_score", "requests": len(statuses),
            "concurrency": concurrency, "scores": [s for s, _, _ in out],
            "right": [r for _, r, _ in out],
            "wrong": sum(1 for s, r, _ in out if abs(s - r) > 1e-9),
            "errors": sum(1 for s in statuses if s not in ("success", "wrong_answer",
                                                           "runtime_error", "timeout")),
            "statuses": {s: statuses.count(s) for s in sorted(set(statuses), key=str)},
            "seconds": round(time.monotonic() - t0, 2)}


class _Ids(list):
    def tolist(self):
        return list(self)


class _CharTokenizer:
    """One token a character: what OpenRLHF's executor needs of a Hugging Face tokenizer."""

    def __call__(self, text, add_special_tokens=False, return_tensors=None):
        return {"input_ids": [_Ids(ord(c) for c in text)]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class _ScriptedEngine:
    """Answers each prompt with the completion given for it (vLLM's ``generate`` shape)."""

    def __init__(self, answers: dict[str, str]):
        self.answers = answers

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        text = self.answers["".join(chr(i) for i in prompt_token_ids)]
        await asyncio.sleep(0)
        out = types.SimpleNamespace(token_ids=[ord(c) for c in text], text=text,
                                    finish_reason="stop", logprobs=None)
        return types.SimpleNamespace(outputs=[out])


def drive_openrlhf(url: str, samples: int = 128, concurrency: int = 64, tests: int = 4) -> dict:
    """OpenRLHF's ``SingleTurnAgentExecutor(remote_rm_url=url).execute`` for ``samples``
    samples, ``concurrency`` at once; each label is its problem with its tests (a JSON text,
    as a dataset's label column holds it). ``url`` ends in ``/reward``."""
    _check_loopback(url)
    agent = load_openrlhf_agent()
    if agent is None:
        raise RuntimeError("OpenRLHF is not installed (pip install --no-deps openrlhf==0.11.2) "
                           "and COEVO_OPENRLHF_DIR is not set")
    import logging
    logging.getLogger("openrlhf").setLevel(logging.WARNING)   # its per-retry lines: counted below
    answers, labels, right = {}, [], []
    for i in range(samples):
        prompt = (f"<|im_start|>user\nPrint the sum of two integers (problem {i}).<|im_end|>\n"
                  "<|im_start|>assistant\n")
        text, ok = _completion(i)
        cases = _problem(tests, i)
        answers[prompt] = text + "<|im_end|>"
        labels.append((prompt, json.dumps({"kind": "stdio", "tests": [
            {"input": f"{a} {b}\n", "output": f"{a + b}\n"} for a, b in cases]})))
        right.append(sum(1 for a, b in cases if ok(a, b)) / len(cases))
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=url)
    tokenizer, engine = _CharTokenizer(), _ScriptedEngine(answers)

    async def main():
        gate = asyncio.Semaphore(concurrency)

        async def one(prompt, label):
            async with gate:
                params = types.SimpleNamespace(max_tokens=4096, logprobs=None)
                out = await executor.execute(prompt, label, params, 1 << 16, tokenizer, engine)
                r = out["reward"]   # the server's "rewards" for this one-query request
                return r[0] if isinstance(r, list) and len(r) == 1 else r
        return await asyncio.gather(*(one(p, lab) for p, lab in labels))

    t0 = time.monotonic()
    rewards = asyncio.run(main())
    return {"client": "openrlhf 0.11.2 SingleTurnAgentExecutor", "requests": samples,
            "concurrency": concurrency, "rewards": rewards, "right": right,
            "wrong": sum(1 for r, g in zip(rewards, right)
                         if r is not None and abs(float(r) - g) > 1e-9),
            "errors": sum(1 for r in rewards if r is None),
            "seconds": round(time.monotonic() - t0, 2)}
