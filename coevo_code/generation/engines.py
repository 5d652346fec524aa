"""Generation engines: one interface, ``generate(conversations, n) -> n completions each``.

- ``TransformersEngine``: a local or hub model (or ``tiny``, the packaged tiny model), CPU or GPU,
  the tokenizer's chat template, batched sampling.
- ``VLLMEngine``: vLLM's offline ``LLM`` API (``pip install -e '.[vllm]'``; needs a GPU).
- ``OpenAIEngine``: any OpenAI-compatible ``/v1/chat/completions`` endpoint, asynchronous with a
  concurrency cap, an optional request-rate limit, and retries with exponential backoff on
  connection errors, 429 and 5xx; an endpoint that stays unreachable is a one-line
  :class:`EngineError`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
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
    name = "vllm"

    def __init__(self, model: str, sampling: Sampling, **llm_kwargs):
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            raise EngineError("the vllm engine needs vLLM (pip install -e '.[vllm]', on a GPU "
                              "machine); use --engine transformers or openai") from None
        self.llm = LLM(model=model, seed=sampling.seed, **llm_kwargs)
        self.params = SamplingParams
        self.sampling = sampling

    def generate(self, conversations, n, progress=None):
        s = self.sampling
        params = self.params(n=n, temperature=s.temperature, top_p=s.top_p,
                             max_tokens=s.max_tokens, seed=s.seed)
        outs = self.llm.chat(list(conversations), params, use_tqdm=False)
        if progress:
            progress(len(conversations))
        return [[c.text for c in o.outputs] for o in outs]


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
        return VLLMEngine(model, sampling)
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
