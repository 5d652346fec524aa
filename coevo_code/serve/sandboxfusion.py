"""SandboxFusion's ``/run_code`` for ``language`` ``python``, ``cpp`` and ``java``, on the judge
(pure functions). C++ and Java run as the job format's native programs (compiled in the sandbox,
``compile_result`` with the compiler's diagnostics); what follows is the Python path.

A request becomes one stdio job: one program, one test whose input is ``stdin``. The program is
the request's code inside a short wrapper that writes the request's ``files`` (base64) into the
cell's work dir, runs the code as ``__main__`` of ``main.py``, records its exit status (as
``python main.py`` would give it) and its stderr (a traceback for an uncaught exception), and at
exit appends one trailer to stdout: a marker with a per-request nonce, then JSON with the return
code, the stderr and the ``fetch_files`` (base64). The response is SandboxFusion's
``RunCodeResponse``: ``status`` (``Success`` / ``Failed`` / ``SandboxError``), ``message``,
``compile_result`` (None: Python compiles nothing ahead), ``run_result`` (``status``
``Finished`` / ``TimeLimitExceeded`` / ``Error``, ``execution_time``, ``return_code``,
``stdout``, ``stderr``) and ``files``.

What differs from SandboxFusion: the program runs under the judge's isolation (no network, its
own work dir, CPU time, memory and output limits); ``run_timeout`` is both the CPU and the wall
limit; stdout comes back up to 64 Ki characters (the executor's cap on returned outputs;
SandboxFusion keeps 1 MiB); a program that leaves by ``os._exit`` or is killed has no trailer, so
its stderr is empty and its return code is 0 when it exited cleanly, 1 otherwise.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import posixpath
import secrets

LANGUAGES = ("python", "python3")
NATIVE = ("cpp", "java")  # compiled by the sandbox (the job format's `language`)
STDERR_CAP = 8192          # characters of stderr in the trailer
FETCH_CAP = 40_000         # base64 characters of fetched files in the trailer

_WRAPPER = r'''import sys as _s, os as _o, atexit as _a, types as _t
_C = %(code)r
_F = %(files)r
_G = %(fetch)r
_K = %(marker)r
_R = [0]
_e = _o.open(".coevo-stderr", _o.O_RDWR | _o.O_CREAT | _o.O_TRUNC, 0o600)
_o.unlink(".coevo-stderr")
_o.dup2(_e, 2)
_o.close(_e)
_s.stderr = open(2, "w", closefd=False, errors="backslashreplace")


def _fin():
    import json, base64
    for f in (_s.stdout, _s.__stdout__, _s.stderr):
        try:
            f.flush()
        except Exception:
            pass
    try:
        _o.lseek(2, 0, 0)
        err = _o.read(2, %(stderr_cap)d * 4).decode("utf-8", "replace")[:%(stderr_cap)d]
    except Exception:
        err = ""
    files, room = {}, %(fetch_cap)d
    for name in _G:
        try:
            with open(name, "rb") as fh:
                data = base64.b64encode(fh.read(room)).decode()
        except Exception:
            continue
        if len(data) > room:
            break
        files[name] = data
        room -= len(data)
    out = (_K + json.dumps({"rc": _R[0], "stderr": err, "files": files})).encode()
    while out:
        try:
            out = out[_o.write(1, out):]
        except Exception:
            break


_a.register(_fin)
try:
    for _n, _d in _F.items():
        if _o.path.dirname(_n):
            _o.makedirs(_o.path.dirname(_n), exist_ok=True)
        with open(_n, "wb") as _h:
            _h.write(_d)
except BaseException as _x:
    _R[0] = 1
    print("coevo serve: the request's file %%r could not be written (%%s: %%s); the code did "
          "not run" %% (_n, type(_x).__name__, _x), file=_s.stderr)
    raise SystemExit(1)
_m = _t.ModuleType("__main__")
_m.__file__ = "main.py"
_m.__builtins__ = __builtins__
_s.modules["__main__"] = _m
try:
    exec(compile(_C, "main.py", "exec"), _m.__dict__)
except SystemExit as _x:
    _c = _x.code
    _R[0] = 0 if _c is None else (_c & 0xFF if isinstance(_c, int) else 1)
    raise
except BaseException as _x:
    import traceback
    traceback.print_exception(type(_x), _x, _x.__traceback__.tb_next)
    _R[0] = 1
    raise SystemExit(1)
'''


class RunCodeError(ValueError):
    """A malformed request: the message is the one-line reason."""


def _number(d: dict, key: str, default: float) -> float:
    v = d.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RunCodeError(f"'{key}' must be a finite number, got {v!r}")
    return float(v)


def unsupported(language, why: str = "") -> dict:
    """The answer for a language this server does not run: ``Failed`` with the reason, no
    compile or run result. Not ``SandboxError``: the SandboxFusion client retries that (and any
    HTTP error) five times, 16 to 18 s, before it raises; a refusal is final."""
    return response("Failed", why or f"coevo serve runs languages python, cpp and java; got "
                    f"{str(language)[:100]!r}", None)


def response(status: str, message: str, run_result: dict | None, files: dict | None = None,
             compile_result: dict | None = None) -> dict:
    return {"status": status, "message": message, "compile_result": compile_result,
            "run_result": run_result, "executor_pod_name": None, "files": files or {}}


def to_job(req) -> tuple[dict, str] | dict:
    """The stdio job for a ``/run_code`` request, and its trailer's marker; or, for another
    language, the error response. Raises :class:`RunCodeError` for a malformed request."""
    if not isinstance(req, dict):
        raise RunCodeError("the request must be a JSON object")
    code = req.get("code")
    if not isinstance(code, str):
        raise RunCodeError("'code' must be a string")
    language = req.get("language", "python")
    if not isinstance(language, str) or language not in LANGUAGES + NATIVE:
        return unsupported(language)
    stdin = req.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise RunCodeError("'stdin' must be a string or null")
    timeout = _number(req, "run_timeout", 10.0)
    if timeout <= 0:
        raise RunCodeError(f"'run_timeout' must be > 0, got {timeout}")
    memory = _number(req, "memory_limit_MB", -1)
    files_in = req.get("files") or {}
    if not isinstance(files_in, dict):
        raise RunCodeError("'files' must be an object of path: base64 content")
    files = {}
    for name, content in files_in.items():
        if content is None or "IGNORE_THIS_FILE" in name:
            continue  # SandboxFusion skips these too
        if (not name or name.startswith("/") or "\x00" in name
                or ".." in name.replace("\\", "/").split("/")):
            raise RunCodeError(f"files: {name!r} must be a relative path inside the work dir")
        if name.endswith(("/", "\\")) or posixpath.normpath(name.replace("\\", "/")) == ".":
            raise RunCodeError(f"files: {name!r} must name a file, not a directory")
        if not isinstance(content, str):
            raise RunCodeError(f"files[{name!r}] must be base64 text")
        try:
            files[name] = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise RunCodeError(f"files[{name!r}] is not valid base64") from None
    fetch = req.get("fetch_files") or []
    if not isinstance(fetch, list) or not all(isinstance(f, str) for f in fetch):
        raise RunCodeError("'fetch_files' must be a list of paths")
    if language in NATIVE:
        if files or fetch:
            raise RunCodeError(f"'files' and 'fetch_files' work with language 'python' only, "
                               f"not {language!r}")
        compile_s = _number(req, "compile_timeout", 10.0)
        if not 0 < compile_s <= 120:
            raise RunCodeError(f"'compile_timeout' must be in (0, 120], got {compile_s}")
        job = {"id": "run_code", "kind": "stdio", "language": language, "programs": [code],
               "tests": [{"input": stdin or "", "output": ""}], "time_limit_s": timeout,
               "wall_limit_s": timeout, "return_outputs": True,
               "compile_time_limit_s": compile_s}
        if memory > 0:
            job["memory_limit_mb"] = max(16, int(memory))
        return job, ""
    marker = "\x00coevo-run-result-" + secrets.token_hex(8) + "\x00"
    program = _WRAPPER % {"code": code, "files": files, "fetch": fetch, "marker": marker,
                          "stderr_cap": STDERR_CAP, "fetch_cap": FETCH_CAP}
    job = {"id": "run_code", "kind": "stdio", "programs": [program],
           "tests": [{"input": stdin or "", "output": ""}], "time_limit_s": timeout,
           "wall_limit_s": timeout, "return_outputs": True}
    if memory > 0:
        job["memory_limit_mb"] = max(16, int(memory))
    return job, marker


def _trailer(text: str) -> dict | None:
    """The wrapper's trailer, or None where it is not one the wrapper writes (the program
    forged it): ``{"rc": int, "stderr": str, "files": {str: str}}``."""
    try:
        t = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(t, dict) and isinstance(t.get("rc"), int)
            and not isinstance(t.get("rc"), bool) and isinstance(t.get("stderr", ""), str)
            and isinstance(t.get("files") or {}, dict)
            and all(isinstance(k, str) and isinstance(v, str)
                    for k, v in (t.get("files") or {}).items())):
        return None
    return t


# what a native program's outcome says in stderr (its own stderr is not kept)
_NATIVE_STDERR = {"runtime_error": "the program exited with an error or a signal\n",
                  "memory_limit": "memory limit exceeded\n",
                  "output_limit": "output limit exceeded\n"}


def from_native(result: dict) -> dict:
    """SandboxFusion's response for a C++ or Java run: ``compile_result`` always (the
    compiler's diagnostics in its stderr); a program that does not compile is ``Failed`` with
    no ``run_result``."""
    outcome = result["outcomes"][0][0]
    out = result.get("outputs", [[""]])[0][0]
    diag = (result.get("compile_output") or [""])[0]
    seconds = result.get("seconds")
    if outcome == "compile_error":
        return response("Failed", "", None, compile_result={
            "status": "Finished", "execution_time": seconds, "return_code": 1, "stdout": "",
            "stderr": diag})
    compiled = {"status": "Finished", "execution_time": None, "return_code": 0, "stdout": "",
                "stderr": diag}
    if outcome == "sandbox_error":
        return response("SandboxError", "the sandbox could not run this program (its slot "
                        "failed twice)", {"status": "Error", "execution_time": seconds,
                                          "stdout": out, "stderr": ""},
                        compile_result=compiled)
    if outcome == "timeout":
        run = {"status": "TimeLimitExceeded", "execution_time": seconds, "return_code": None,
               "stdout": out, "stderr": ""}
        return response("Failed", "", run, compile_result=compiled)
    rc = 0 if outcome in ("ok", "wrong_answer") else 1
    run = {"status": "Finished", "execution_time": seconds, "return_code": rc, "stdout": out,
           "stderr": _NATIVE_STDERR.get(outcome, "")}
    return response("Success" if rc == 0 else "Failed", "", run, compile_result=compiled)


def from_result(result: dict, marker: str) -> dict:
    """SandboxFusion's response for the job's result (``marker`` empty: a C++ or Java job)."""
    if "error" in result:
        if "cannot run in this sandbox" in result["error"]:
            return unsupported(None, result["error"])
        return response("SandboxError", result["error"], {"status": "Error"})
    if not marker:
        return from_native(result)
    outcome = result["outcomes"][0][0]
    out = result.get("outputs", [[""]])[0][0]
    seconds = result.get("seconds")
    trailer = None
    k = out.rfind(marker)
    if k >= 0:
        trailer = _trailer(out[k + len(marker):])
        out = out[:k]
    if outcome == "sandbox_error":
        return response("SandboxError", "the sandbox could not run this program (its slot "
                        "failed twice)", {"status": "Error", "execution_time": seconds,
                                          "stdout": out, "stderr": ""})
    if outcome == "timeout":
        return response("Failed", "", {"status": "TimeLimitExceeded", "execution_time": seconds,
                                       "return_code": None, "stdout": out,
                                       "stderr": (trailer or {}).get("stderr", "")})
    if trailer is not None:
        rc, err, files = trailer["rc"], trailer.get("stderr", ""), trailer.get("files") or {}
    else:
        rc = 0 if outcome in ("ok", "wrong_answer") else 1
        err, files = "", {}
        if outcome == "memory_limit":
            err = "MemoryError\n"
        elif outcome == "output_limit":
            err = "output limit exceeded\n"
    return response("Success" if rc == 0 else "Failed", "",
                    {"status": "Finished", "execution_time": seconds, "return_code": rc,
                     "stdout": out, "stderr": err}, files)
