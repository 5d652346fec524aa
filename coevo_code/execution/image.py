"""The docker launcher's image, built offline from this host's own Python installation.

``build_image()`` (``coevo build-image``) assembles a root file system that holds a Python
interpreter, its standard library, numpy, the host's C++ and Java toolchains where it has them
(``image_toolchains.py``: g++ with its passes, headers and the static libraries of the judge's
``-static`` link; the JDK's javac and java) and the shared libraries all of these load (found
with ``ldd``), and nothing else: no shell, no package manager, no ``/etc/passwd``, no coevo code
(the launcher sends the sandbox modules on the judge's command line). It is imported with
``docker import`` through the engine's API, so no registry is needed. Layout (like the official
python images)::

    /usr/local/bin/python3, python3.X, python   the interpreter
    /usr/local/lib/python3.X/                   its standard library (no test suite, IDLE, tkinter,
                                                ensurepip, lib2to3), compiled .pyc files included
    /usr/local/lib/python3.X/site-packages/     numpy (without its tests) and numpy.libs (where a
                                                Debian-built Python looks: .../dist-packages)
    /usr/lib/<multiarch>/                       libpython and every shared library ldd names
    /usr/lib64/ld-linux-*.so.*                  the dynamic loader
    /bin, /lib, /lib64 -> usr/...               merged-/usr links; empty /tmp, /proc, /dev
    the toolchains' files                       at their host paths, with the links that lead
                                                to them (/usr/bin/g++, /usr/lib/gcc/..., the
                                                headers, /usr/bin/java -> /etc/alternatives/
                                                java -> <JDK>/bin/java, /etc/java-N-openjdk)

The image carries labels: ``coevo.python`` (the interpreter's path inside it),
``coevo.languages`` (``python,cpp,java``: what its judges can run) and ``coevo.fingerprint`` (a
hash of what went in, every toolchain file's path, size and time included): ``build_image`` does
nothing when an image of the same tag already has the fingerprint it would build, unless
``force``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from .image_toolchains import TOOL_LANGUAGES, ToolchainError, place
from .image_toolchains import probe as probe_toolchains

DEFAULT_TAG = "coevo-sandbox:latest"
IMAGE_PYTHON = "/usr/local/bin/python3"
MAX_IMAGE_MB = 200  # Python, its standard library and numpy ...
TOOLCHAIN_MB = {"cpp": 120, "java": 220}  # ... and what each toolchain may add

# Parts of the standard library a judged program has no use for (and 170 MB of the test suite).
STDLIB_SKIP_DIRS = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                    "site-packages", "dist-packages", "__phello__", "venv"}
STDLIB_SKIP_PREFIXES = ("config-",)  # config-3.11-x86_64-linux-gnu: the static libpython
STDLIB_SKIP_FILES = {"turtle.py"}
# Extension modules left out: Tk (X11 libraries), NIS (Kerberos), the interpreter's own tests.
DYNLOAD_SKIP_PREFIXES = ("_tkinter", "nis.", "_test", "_ctypes_test", "xxlimited", "xxsubtype",
                         "_xxsubinterpreters", "_xxtestfuzz")
NUMPY_SKIP_DIRS = {"tests", "include", "distutils", "_pyinstaller", "_examples"}
NUMPY_SKIP_SUFFIXES = (".pyi", ".pxd", ".h", ".c", ".a", ".txt")
# Loaded with dlopen, so ldd does not name it: glibc needs it for pthread_exit and cancellation.
DLOPENED = ("libgcc_s.so.1",)

# Where an interpreter looks for packages once it runs from /usr/local (Debian's own Python
# reads dist-packages, others site-packages); asked of the base interpreter, not of a venv.
_SITE_PROBE = r"""
import json, site
print(json.dumps([p for p in site.getsitepackages(["/usr/local"])
                  if p.startswith("/usr/local/lib/")]))
"""
_PROBE = r"""
import json, os, sys, sysconfig
info = {"executable": os.path.realpath(sys.executable),
        "version": "%d.%d" % sys.version_info[:2], "full_version": sys.version.split()[0],
        "stdlib": sysconfig.get_paths()["stdlib"],
        "dynload": next((p for p in sys.path if p.endswith("lib-dynload")), ""),
        "numpy": None, "numpy_version": None, "numpy_libs": None}
try:
    import numpy
    d = os.path.dirname(os.path.realpath(numpy.__file__))
    info["numpy"], info["numpy_version"] = d, numpy.__version__
    libs = os.path.join(os.path.dirname(d), "numpy.libs")
    info["numpy_libs"] = libs if os.path.isdir(libs) else None
except ImportError:
    pass
print(json.dumps(info))
"""


class BuildError(RuntimeError):
    pass


def probe_python(python: str) -> dict:
    """What the image is built from: the interpreter's real path, its standard library and
    lib-dynload, and the numpy it imports (with the wheel's bundled libraries)."""
    r = subprocess.run([python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise BuildError(f"{python} could not describe itself: {r.stderr.strip()[-500:]}")
    info = json.loads(r.stdout.strip().splitlines()[-1])
    r = subprocess.run([info["executable"], "-I", "-c", _SITE_PROBE], capture_output=True,
                       text=True, timeout=120)
    dirs = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else []
    info["site"] = dirs[0] if dirs else None
    if not info["numpy"]:
        raise BuildError(f"{python} cannot import numpy, which the image must hold "
                         "(pip install numpy into that environment)")
    return info


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _ldd(paths: list[Path], provided=frozenset()) -> tuple[dict[str, str], str | None]:
    """The shared libraries ``paths`` load (soname -> host path) and the dynamic loader.
    ``provided``: sonames the image holds where their users find them at run time though ldd
    does not (the JVM's libjvm.so, loaded before the libraries that name it)."""
    libs: dict[str, str] = {}
    loader = None
    for i in range(0, len(paths), 64):
        batch = [str(p) for p in paths[i:i + 64]]
        r = subprocess.run(["ldd", *batch], capture_output=True, text=True, timeout=120)
        for line in r.stdout.splitlines():
            line = line.strip()
            if "not found" in line:
                name = line.split()[0]
                if name in provided:
                    continue
                raise BuildError(f"ldd: {name} is not found for one of {batch}")
            if "=>" in line:
                name, rest = line.split("=>", 1)
                target = rest.split("(")[0].strip()
                if target and target.startswith("/"):
                    libs.setdefault(name.strip(), target)
            elif line.startswith("/") and "ld-linux" in line:
                loader = line.split()[0]
    return libs, loader


def _copy_tree(src: Path, dst: Path, skip_dir, skip_file) -> int:
    """Copy ``src`` into ``dst`` keeping modification times (the .pyc files check them)."""
    n = 0
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        dirs[:] = sorted(d for d in dirs if not skip_dir(rel, d))
        out = dst / rel
        out.mkdir(parents=True, exist_ok=True)
        for f in sorted(files):
            if skip_file(rel, f):
                continue
            s = Path(root) / f
            if s.is_symlink() and not s.exists():
                continue
            shutil.copy2(s, out / f)
            n += 1
    return n


def _skip_stdlib_dir(rel: Path, d: str) -> bool:
    return rel == Path(".") and (d in STDLIB_SKIP_DIRS or d.startswith(STDLIB_SKIP_PREFIXES)
                                 or d == "lib-dynload")


def _skip_pyc_or(names=()):
    def skip(rel: Path, f: str) -> bool:
        if f.endswith(".pyc") and (".opt-1." in f or ".opt-2." in f):
            return True
        if rel == Path(".") and f in names:
            return True
        return False
    return skip


def _skip_numpy_file(rel: Path, f: str) -> bool:
    return f.endswith(NUMPY_SKIP_SUFFIXES) or _skip_pyc_or()(rel, f)


def _fingerprint(info: dict, sources: list[Path], toolchains: dict | None = None) -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(Path(__file__).with_name("image_toolchains.py").read_bytes())
    h.update(json.dumps(info, sort_keys=True).encode())
    for lang, tc in sorted((toolchains or {}).items()):  # every file of it: path, size, time
        h.update(json.dumps(tc.describe(), sort_keys=True).encode())
    for p in sources:
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def assemble_rootfs(root: Path, info: dict, toolchains: dict | None = None) -> dict:
    """Lay the image's files out under ``root``, with ``toolchains``
    (``image_toolchains.probe``'s) at their host paths; returns counts, the libraries copied
    and the bytes of each toolchain."""
    ver = info["version"]
    local = root / "usr" / "local"
    stdlib_dst = local / "lib" / f"python{ver}"
    site = root / (info.get("site") or f"/usr/local/lib/python{ver}/site-packages").lstrip("/")
    for d in ("usr/bin", "usr/lib", "usr/lib64", "usr/local/bin", "etc", "tmp", "proc", "dev",
              "sys"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
        os.symlink(target, root / link)
    # the interpreter
    exe = local / "bin" / f"python{ver}"
    shutil.copy2(info["executable"], exe)
    for alias in ("python3", "python"):
        os.symlink(f"python{ver}", local / "bin" / alias)
    # its standard library, lib-dynload and numpy
    n_std = _copy_tree(Path(info["stdlib"]), stdlib_dst, _skip_stdlib_dir,
                       _skip_pyc_or(STDLIB_SKIP_FILES))
    dyn_src = Path(info["dynload"]) if info["dynload"] else Path(info["stdlib"]) / "lib-dynload"
    n_dyn = _copy_tree(dyn_src, stdlib_dst / "lib-dynload", lambda r, d: True,
                       lambda r, f: f.startswith(DYNLOAD_SKIP_PREFIXES))
    n_np = _copy_tree(Path(info["numpy"]), site / "numpy",
                      lambda r, d: d in NUMPY_SKIP_DIRS or d.startswith("."), _skip_numpy_file)
    if info["numpy_libs"]:
        n_np += _copy_tree(Path(info["numpy_libs"]), site / "numpy.libs", lambda r, d: True,
                           lambda r, f: False)
    # .pyc files for whatever had none: the root is read-only, so nothing could cache them later
    trees = [str(stdlib_dst)] + ([] if site.is_relative_to(stdlib_dst) else [str(site)])
    r = subprocess.run([info["executable"], "-I", "-m", "compileall", "-q", "-j", "0",
                        "-s", str(root), "-p", "/", *trees],
                       capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 1):  # 1: a file that does not compile (some lib2to3 fixtures)
        raise BuildError(f"compileall failed: {r.stderr.strip()[-500:]}")
    # the C++ and Java toolchains, each file at its host path with the links that lead to it
    tool_bytes, provided = {}, set()
    for lang, tc in (toolchains or {}).items():
        try:
            tool_bytes[lang] = sum(place(root, p) for p in tc.paths)
        except (ToolchainError, OSError) as e:
            raise BuildError(f"placing the {lang} toolchain: {e}") from e
        provided |= tc.provided
    # every shared library these load, and the dynamic loader
    elves = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    # ldd runs on the host copies, so that the libraries resolve as they do here
    host_elves = [Path(info["executable"])] + [p for p in elves if p != exe]
    libs, loader = _ldd(host_elves, provided)
    if loader is None:
        raise BuildError("ldd named no dynamic loader for the interpreter")
    libc = libs.get("libc.so.6")
    if libc is None:
        raise BuildError("ldd named no libc for the interpreter")
    multiarch = Path(os.path.realpath(libc)).parent.name  # x86_64-linux-gnu
    libdir = root / "usr" / "lib" / multiarch
    libdir.mkdir(parents=True, exist_ok=True)
    ours = [str(root)] + ([info["numpy_libs"]] if info["numpy_libs"] else [])
    copied = {}
    for name in DLOPENED:
        host = next((str(Path(d) / name) for d in (Path(libc).parent, f"/usr/lib/{multiarch}")
                     if (Path(d) / name).exists()), None)
        if host:
            libs.setdefault(name, host)
    for name, host in sorted(libs.items()):
        real = os.path.realpath(host)
        if any(real.startswith(o.rstrip("/") + "/") for o in ours):
            continue  # numpy.libs: found through the extension modules' $ORIGIN rpath
        if (libdir / name).exists():
            continue
        shutil.copy2(real, libdir / name)
        copied[name] = real
    # /lib64/ld-linux-x86-64.so.2 (the path the interpreter names): /lib64 -> usr/lib64 here
    top = Path(loader).parts[1]
    loader_dst = root / ("usr/" if (root / top).is_symlink() else "") / loader.lstrip("/")
    loader_dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(loader), loader_dst)
    if not (libdir / Path(loader).name).exists():
        os.symlink(os.path.relpath(loader_dst, libdir), libdir / Path(loader).name)
    leaked = [str(p) for p in root.rglob("*coevo*")]
    if leaked:
        raise BuildError(f"the image would hold coevo files: {leaked[:3]}")
    return {"stdlib_files": n_std, "dynload_files": n_dyn, "numpy_files": n_np,
            "libraries": copied, "loader": loader, "toolchain_bytes": tool_bytes}


def _tar_filter(t: tarfile.TarInfo) -> tarfile.TarInfo:
    """Owned by root, readable (and, where executable or a directory, searchable) by all: the
    judge's cells run under per-slot uids that must import the standard library and numpy."""
    t.uid = t.gid = 0
    t.uname = t.gname = "root"
    if t.isdir():
        t.mode = 0o1777 if t.name in ("tmp", "./tmp") else 0o755
    elif t.isfile():
        t.mode = 0o755 if t.mode & 0o111 else 0o644
    return t


def _client():
    try:
        import docker
    except ImportError as e:
        raise BuildError("the docker SDK is not installed (pip install docker)") from e
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as e:
        raise BuildError(f"no Docker engine answers ({type(e).__name__}: {e})") from e
    return client


def image_info(tag: str = DEFAULT_TAG, client=None) -> dict | None:
    """Size (bytes), id and labels of an image, or None where it is absent."""
    client = client or _client()
    try:
        img = client.images.get(tag)
    except Exception:  # noqa: BLE001 - the SDK raises several kinds for an absent image
        return None
    return {"id": img.id, "size": img.attrs.get("Size", 0),
            "labels": (img.attrs.get("Config") or {}).get("Labels") or {}}


def parse_languages(spec: str | None) -> tuple[tuple[str, ...], bool]:
    """``--languages``: None or ``auto`` (Python, and every toolchain this host has), else a
    comma-separated list that must hold ``python``. Returns the toolchain languages and whether
    they are required (named) rather than taken where found."""
    if spec is None or spec == "auto":
        return TOOL_LANGUAGES, False
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("python",) + TOOL_LANGUAGES]
    if unknown or "python" not in names:
        raise BuildError(f"--languages {spec!r}: a comma-separated list of python (always), "
                         f"{', '.join(TOOL_LANGUAGES)}; or auto")
    return tuple(n for n in TOOL_LANGUAGES if n in names), True


def max_image_mb(languages) -> int:
    """The size an image holding ``languages`` should stay under (the tests check it)."""
    return MAX_IMAGE_MB + sum(TOOLCHAIN_MB.get(lang, 0) for lang in languages)


def build_image(tag: str = DEFAULT_TAG, python: str | None = None, force: bool = False,
                workdir: str | None = None, log=print, languages: str | None = None) -> dict:
    """Build the sandbox image from ``python``'s installation (default: this interpreter), with
    the C++ and Java toolchains of ``languages`` (``parse_languages``; default: every one this
    host has), and import it into the engine as ``tag``; no registry is contacted. Returns what
    was done: ``tag``, ``id``, ``size_mb``, ``seconds``, ``python``, ``numpy``, ``languages``,
    ``built`` (False when an image with the same fingerprint was already there)."""
    t0 = time.monotonic()
    python = python or sys.executable
    info = probe_python(python)
    wanted, required = parse_languages(languages)
    try:
        toolchains = probe_toolchains(wanted, workdir, required=wanted if required else ())
    except ToolchainError as e:
        raise BuildError(str(e)) from e
    langs = ["python"] + list(toolchains)
    client = _client()
    sources = [Path(info["executable"]), Path(info["stdlib"]) / "os.py",
               Path(info["numpy"]) / "__init__.py", Path(info["numpy"]) / "version.py"]
    fp = _fingerprint(info, sources, toolchains)
    have = image_info(tag, client)
    out = {"tag": tag, "python": f"{info['full_version']} ({info['executable']})",
           "numpy": info["numpy_version"], "fingerprint": fp, "languages": langs,
           "toolchains": {lang: tc.version for lang, tc in toolchains.items()}}
    tools = "".join(f", {tc.version}" for tc in toolchains.values())
    if have and have["labels"].get("coevo.fingerprint") == fp and not force:
        out.update(id=have["id"], size_mb=round(have["size"] / 1e6, 1), built=False,
                   seconds=round(time.monotonic() - t0, 1))
        log(f"coevo build-image: {tag} is up to date ({out['size_mb']} MB, Python "
            f"{out['python']}, numpy {out['numpy']}{tools}); --force rebuilds it")
        return out
    with tempfile.TemporaryDirectory(prefix="coevo-image-", dir=workdir) as tmp:
        root = Path(tmp) / "rootfs"
        root.mkdir()
        done = assemble_rootfs(root, info, toolchains)
        t1 = time.monotonic()
        tar_path = Path(tmp) / "rootfs.tar"
        with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
            for entry in sorted(os.listdir(root)):
                tar.add(root / entry, arcname=entry, filter=_tar_filter)
        source = f"python-{info['full_version']}+numpy-{info['numpy_version']}" + "".join(
            "+" + tc.version.replace(" ", "-") for tc in toolchains.values())
        changes = [f"LABEL coevo.python={IMAGE_PYTHON}", f"LABEL coevo.fingerprint={fp}",
                   f"LABEL coevo.languages={','.join(langs)}", f"LABEL coevo.source={source}",
                   "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "
                   "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1",
                   "WORKDIR /tmp", f'CMD ["{IMAGE_PYTHON}"]']
        repo, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "")
        client.api.import_image_from_file(str(tar_path), repository=repo or tag,
                                          tag=version or "latest", changes=changes)
        t2 = time.monotonic()
    old, have = have, image_info(tag, client)
    if have is None or have["labels"].get("coevo.fingerprint") != fp:
        raise BuildError(f"docker import did not produce {tag}")
    if old and old["id"] != have["id"]:  # the image this one replaced, now untagged
        try:
            client.images.remove(old["id"])
        except Exception:  # noqa: BLE001 - still tagged elsewhere or used by a container
            pass
    out.update(id=have["id"], size_mb=round(have["size"] / 1e6, 1), built=True,
               seconds=round(time.monotonic() - t0, 1), assemble_s=round(t1 - t0, 1),
               import_s=round(t2 - t1, 1), libraries=sorted(done["libraries"]),
               files=done["stdlib_files"] + done["dynload_files"] + done["numpy_files"],
               toolchain_mb={lang: round(b / 1e6, 1)
                             for lang, b in done["toolchain_bytes"].items()})
    with_tools = "".join(f", {tc.version} ({out['toolchain_mb'][lang]} MB)"
                         for lang, tc in toolchains.items())
    log(f"coevo build-image: built {tag} ({out['id'][7:19]}) from Python {out['python']} and "
        f"numpy {out['numpy']}{with_tools}: {out['size_mb']} MB, {out['files']} Python files and "
        f"{len(out['libraries'])} shared libraries, in {out['seconds']} s (root file system "
        f"{out['assemble_s']} s, tar and docker import {out['import_s']} s); languages "
        f"{', '.join(langs)}; no registry used")
    for lang, tc in toolchains.items():
        for note in tc.notes:
            log(f"coevo build-image: {lang}: {note}")
    missing = [lang for lang in TOOL_LANGUAGES if lang not in toolchains]
    if missing and not required:
        log(f"coevo build-image: no {', '.join(missing)} toolchain on this host "
            f"({', '.join(missing)} jobs are refused under docker)")
    if out["size_mb"] > max_image_mb(langs):
        log(f"coevo build-image: warning: the image is over {max_image_mb(langs)} MB")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="coevo build-image",
                                 description="build the docker launcher's sandbox image offline, "
                                             "from this host's Python installation and numpy, "
                                             "and its C++ and Java toolchains")
    ap.add_argument("--tag", default=DEFAULT_TAG, help=f"image tag (default {DEFAULT_TAG})")
    ap.add_argument("--python", default=None,
                    help="the interpreter whose installation and numpy go into the image "
                         "(default: the one running this command)")
    ap.add_argument("--languages", default=None, metavar="LIST",
                    help="what the image runs: python plus any of cpp, java, comma-separated "
                         "(a named toolchain the host lacks is an error); default auto: "
                         "python and every toolchain (g++, a JDK) this host has")
    ap.add_argument("--no-toolchains", action="store_true",
                    help="Python only (the same as --languages python)")
    ap.add_argument("--force", action="store_true",
                    help="rebuild even when an up-to-date image of this tag exists")
    args = ap.parse_args(argv)
    if args.no_toolchains and args.languages not in (None, "python"):
        ap.error("--no-toolchains and --languages name different sets")
    try:
        build_image(args.tag, python=args.python, force=args.force,
                    languages="python" if args.no_toolchains else args.languages)
    except BuildError as e:
        print(f"coevo build-image: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
