"""The C++ and Java toolchains that ``coevo build-image`` puts into the sandbox image, chosen by
asking the tools themselves, so that the docker launcher's judges compile and run native
programs with the host's own g++ and JDK, as the direct and bwrap launchers do.

C++ (:func:`probe_cpp`): one probe compile with the judge's own command
(``sandbox.native.RUNNERS["cpp"]``: ``-static``, its runtime file) plus ``-v`` (the passes the
driver runs, the LTO plugin and the header search list), ``-H`` (the headers it read) and
``-Wl,--trace`` (every file the static link opened: the crt files, libstdc++.a, libm.a and what
its linker script names, libgcc.a, libgcc_eh.a, libc.a). ``-print-prog-name`` names as, ld,
cc1plus, collect2 and lto-wrapper, ``-print-file-name`` the static libraries, and
``-print-search-dirs`` the compiler's own directory. The headers are the search list's
directories as the packages owning the headers the probe read hold them (asked of dpkg or rpm:
on Debian libc6-dev, linux-libc-dev, libstdc++-N-dev, libgcc-N-dev; not the other packages'
headers that share /usr/include); the compiler's own include directory, /usr/local's, and any
directory where no package manager answers, whole.

Java (:func:`probe_java`): the JDK home of ``javac`` and ``java`` (their real paths), without
what compiling and running a program never reads: ``jmods``, ``src.zip``, ``ct.sym`` (only
``--release`` reads it), the demos, manuals, licences, C headers, the launchers of the other JDK
tools, the CDS archive for uncompressed oops, and the desktop natives (AWT, fonts, sound, smart
cards, the debugger agents), whose libraries (X11, freetype, ALSA, ...) would come with them.

Each probe returns a :class:`Toolchain`: host paths the image holds at the same paths, each with
the symlinks that lead to it (``/usr/bin/java -> /etc/alternatives/java -> <JDK>/bin/java``; the
JDK's ``conf`` links into ``/etc/java-N-openjdk``), which is where ``native.find_tools`` looks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox.native import ENV, RUNNERS

TOOL_LANGUAGES = ("cpp", "java")  # the languages a toolchain brings (Python is always there)

# the C++ probe: a C++ header, the C library's and the kernel's (through sys/syscall.h), so that
# the packages owning each kind of header are asked for
CPP_PROBE = ("#include <cstdio>\n#include <cmath>\n#include <sys/syscall.h>\n"
             "int main(){ std::printf(\"%g %ld\\n\", std::sqrt(2.0), (long)SYS_getpid); }\n")
# asked of the driver besides what the probe's link opened (a link that needs none of them still
# finds them where a program's does)
CPP_LINK_FILES = ("libstdc++.a", "libm.a", "libc.a", "libgcc.a", "libgcc_eh.a", "crt1.o",
                  "crti.o", "crtn.o", "crtbeginT.o", "crtend.o")
CPP_PROGS = ("cc1plus", "collect2", "lto-wrapper", "as", "ld")

JAVA_SKIP_DIRS = {"jmods", "demo", "man", "legal", "include", "docs", "sample"}
JAVA_SKIP_FILES = {"lib/src.zip", "src.zip", "lib/ct.sym", "lib/server/classes_nocoops.jsa"}
# java.desktop's natives (X11, freetype, harfbuzz, lcms, jpeg, ALSA), smart cards, accessibility,
# the serviceability agent and the debugger's transport: nothing a console program loads
JAVA_SKIP_LIBS = ("libawt", "libjawt", "libatk-wrapper", "libsplashscreen", "libfontmanager",
                  "liblcms", "libjavajpeg", "libmlib_image", "libjsound", "libj2pcsc",
                  "libsaproc", "libdt_socket", "libjdwp")


class ToolchainError(RuntimeError):
    pass


@dataclass
class Toolchain:
    """What one language brings into the image: ``paths`` (host paths, placed at the same paths
    with the links leading to them), ``provided`` (sonames the toolchain holds itself, which
    ``ldd`` cannot resolve from outside: libjvm.so), and a ``version`` for the labels."""

    language: str
    version: str
    paths: list[str] = field(default_factory=list)
    provided: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> dict:
        """What the fingerprint covers: the version and every file's path, size and time."""
        files = []
        for p in sorted(set(self.paths)):
            try:
                st = os.stat(p)
            except OSError:
                continue
            files.append(f"{p}:{st.st_size}:{int(st.st_mtime)}")
        return {"language": self.language, "version": self.version, "files": files}


def _run(argv, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"{argv[0]}: {e}") from e


def _walk(top: str) -> list[str]:
    """Every file and symlink under ``top`` (directories by their contents)."""
    out = []
    for root, dirs, files in os.walk(top):
        for d in list(dirs):
            if os.path.islink(os.path.join(root, d)):
                out.append(os.path.join(root, d))
        out.extend(os.path.join(root, f) for f in files)
    return sorted(out)


def _under(path: str, dirs) -> str | None:
    """The longest of ``dirs`` that ``path`` lies under, or None."""
    best = None
    for d in dirs:
        if path.startswith(d.rstrip("/") + "/") and (best is None or len(d) > len(best)):
            best = d
    return best


# ---- package managers: which package owns a header, and what else it holds ------------------
def _owners(paths: list[str]) -> tuple[set[str], list[str]] | None:
    """The packages owning ``paths`` and the paths no package owns, from dpkg or rpm (one call
    for all); None where neither is here."""
    if not paths:
        return set(), []
    if shutil.which("dpkg-query"):
        r = _run(["dpkg-query", "-S", *paths])
        owned: dict[str, str] = {}
        for line in r.stdout.splitlines():
            if ": " not in line or line.startswith("diversion "):
                continue
            pkgs, path = line.split(": ", 1)
            owned[path] = pkgs.split(",")[0].strip()
        return set(owned.values()), [p for p in paths if p not in owned]
    if shutil.which("rpm"):  # a package name per line, or "file X is not owned by any package"
        r = _run(["rpm", "-qf", "--qf", "%{NAME}\n", *paths])
        pkgs, unowned = set(), []
        for line in r.stdout.splitlines():
            m = re.match(r"file (/.*) is not owned by any package$", line.strip())
            if m:
                unowned.append(m.group(1))
            elif line.strip() and " " not in line.strip():
                pkgs.add(line.strip())
        return pkgs, unowned
    return None


def _package_files(pkgs: set[str]) -> list[str]:
    if not pkgs:
        return []
    if shutil.which("dpkg-query"):
        r = _run(["dpkg-query", "-L", *sorted(pkgs)])
    else:
        r = _run(["rpm", "-ql", *sorted(pkgs)])
    return [line.strip() for line in r.stdout.splitlines() if line.startswith("/")]


def _headers(include_dirs: list[str], read: list[str], own_dirs: list[str]) -> tuple[list[str], str]:
    """The headers the image holds: see the module's docstring. Returns them and how they were
    chosen."""
    whole = {d for d in include_dirs if _under(d + "/x", own_dirs) or d.startswith("/usr/local/")}
    read = [p for p in read if _under(p, include_dirs)]
    owners = _owners(read)
    if owners is None:
        how = "whole include directories (no dpkg or rpm to ask)"
        whole = set(include_dirs)
        files: list[str] = []
    else:
        pkgs, unowned = owners
        for p in unowned:  # a header no package owns: its directory whole
            whole.add(_under(p, include_dirs))
        files = [p for p in _package_files(pkgs) if _under(p, include_dirs)
                 and (os.path.islink(p) or os.path.isfile(p))]
        how = "the headers of " + ", ".join(sorted(pkgs))
        if whole:
            how += "; whole: " + ", ".join(sorted(whole))
    for d in sorted(whole):
        files.extend(_walk(d))
    return sorted(set(files)), how


# ---- C++ ------------------------------------------------------------------------------------------
def _parse_verbose(stderr: str) -> tuple[list[str], list[str]]:
    """From ``g++ -v``'s output: the header search list and the programs and plugins run."""
    include, progs = [], []
    lines = stderr.splitlines()
    inside = False
    for line in lines:
        if line.startswith("#include <...> search starts here:"):
            inside = not include
            continue
        if line.startswith("End of search list."):
            inside = False
            continue
        if inside and line.startswith(" /"):
            include.append(os.path.normpath(line.strip()))
            continue
        if line.startswith(" ") and not inside:  # a pass the driver ran
            tokens = line.split()
            if not tokens:
                continue
            progs.append(tokens[0])
            for i, t in enumerate(tokens):
                if t == "-plugin" and i + 1 < len(tokens):
                    progs.append(tokens[i + 1])
                elif t.startswith("-plugin-opt=/"):
                    progs.append(t.split("=", 1)[1])
    return include, progs


def probe_cpp(workdir: str | None = None) -> Toolchain | None:
    """The C++ toolchain, or None where the judge's compiler is not on its PATH."""
    runner = RUNNERS["cpp"]
    gxx = shutil.which(runner.tools[0], path=ENV["PATH"])
    if gxx is None:
        return None
    env = dict(ENV)

    def ask(*args) -> str:
        r = _run([gxx, *args], env=env)
        if r.returncode != 0:
            raise ToolchainError(f"{gxx} {' '.join(args)}: {r.stderr.strip()[-300:]}")
        return r.stdout.strip()

    version = ask("-dumpfullversion")
    install = ""
    for line in ask("-print-search-dirs").splitlines():
        if line.startswith("install:"):
            install = os.path.normpath(line.split(":", 1)[1].strip())
    with tempfile.TemporaryDirectory(prefix="coevo-cpp-probe-", dir=workdir) as d:
        Path(d, "main.cpp").write_text(CPP_PROBE)
        for name, text in runner.files.items():
            Path(d, name).write_text(text)
        argv = [a.replace("{src}", "main.cpp") for a in runner.compile]
        argv[0] = gxx
        r = _run(argv + ["-v", "-H", "-Wl,--trace"], cwd=d, env=dict(env, TMPDIR=d))
        if r.returncode != 0 or not os.path.exists(os.path.join(d, "main")):
            raise ToolchainError(f"{gxx} could not compile and link the probe program with the "
                                 f"judge's command ({' '.join(runner.compile)}): "
                                 f"{r.stderr.strip()[-500:]}")
        include, progs = _parse_verbose(r.stderr)
        linked = [os.path.normpath(line.strip()) for line in r.stdout.splitlines()
                  if line.startswith("/") and not line.startswith(d)]
        read = [os.path.normpath(m.group(1))  # -H: one line per header, dots for its depth
                for m in re.finditer(r"^\.+ (/\S+)$", r.stderr, re.M)]
    if not include:
        raise ToolchainError(f"{gxx} -v named no header search list")
    paths = [gxx]
    for name in CPP_PROGS:
        p = ask(f"-print-prog-name={name}")
        p = p if os.path.isabs(p) else shutil.which(p, path=ENV["PATH"])
        if not p or not os.path.exists(p):
            raise ToolchainError(f"{gxx} names no {name} ({p})")
        paths.append(p)
    for p in progs:
        p = p if os.path.isabs(p) else shutil.which(p, path=ENV["PATH"])
        if p and os.path.isfile(p):
            paths.append(p)
    for name in CPP_LINK_FILES:
        p = ask(f"-print-file-name={name}")
        if os.path.isabs(p) and os.path.exists(p):
            paths.append(os.path.normpath(p))
    paths += [p for p in linked if os.path.isfile(p)]
    headers, how = _headers(include, read, [install] if install else [])
    if not any(p.endswith("/bits/stdc++.h") for p in headers):
        raise ToolchainError(f"the headers chosen for {gxx} ({how}) hold no bits/stdc++.h")
    return Toolchain("cpp", f"g++ {version}", sorted(set(paths)) + headers,
                     notes=[f"headers: {how}"])


# ---- Java ----------------------------------------------------------------------------------------
def _java_home(binary: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.realpath(binary)))


def _ldd_missing(paths: list[str]) -> dict[str, set[str]]:
    """{path: sonames ldd cannot resolve} for shared libraries."""
    out: dict[str, set[str]] = {}
    for i in range(0, len(paths), 64):
        batch = paths[i:i + 64]
        r = _run(["ldd", *batch])
        current = batch[0] if len(batch) == 1 else None
        for line in r.stdout.splitlines():
            if not line.startswith("\t") and line.endswith(":"):
                current = line[:-1]
                continue
            if "not found" in line and current:
                out.setdefault(current, set()).add(line.split()[0])
    return out


def probe_java() -> Toolchain | None:
    """The JDK, or None where the judge's javac or java is not on its PATH."""
    runner = RUNNERS["java"]
    bins = [shutil.which(t, path=ENV["PATH"]) for t in runner.tools]
    if None in bins:
        return None
    homes = sorted({_java_home(b) for b in bins})
    paths = list(bins)
    libs = []
    version = "?"
    for home in homes:
        release = Path(home, "release")
        if release.exists():
            m = re.search(r'^JAVA_VERSION="([^"]+)"', release.read_text(), re.M)
            version = m.group(1) if m else version
        for p in _walk(home):
            rel = os.path.relpath(p, home)
            parts = rel.split(os.sep)
            if parts[0] in JAVA_SKIP_DIRS or rel in JAVA_SKIP_FILES:
                continue
            if parts[0] == "bin" and parts[-1] not in runner.tools:
                continue  # the launchers of the JDK's other tools
            if parts[-1].startswith(JAVA_SKIP_LIBS) and parts[-1].endswith(".so"):
                continue
            if not os.path.exists(p):
                continue  # a dangling link (a certificate store that is not installed)
            if parts[-1].endswith(".so") and not os.path.islink(p):
                libs.append(p)
            paths.append(p)
    provided = {os.path.basename(p) for p in libs}
    dropped = []
    for lib, missing in _ldd_missing(libs).items():
        if missing - provided:  # needs a library this host lacks: nothing a program loads
            paths.remove(lib)
            dropped.append(f"{os.path.basename(lib)} (needs {', '.join(sorted(missing))})")
    notes = [f"JDK {', '.join(homes)}"] + ([f"left out: {'; '.join(dropped)}"] if dropped else [])
    return Toolchain("java", f"openjdk {version}", sorted(set(paths)), provided, notes)


PROBES = {"cpp": probe_cpp, "java": lambda workdir=None: probe_java()}


def probe(languages, workdir: str | None = None, required=()) -> dict[str, Toolchain]:
    """The toolchains of ``languages`` this host has; a language in ``required`` that it lacks
    is an error."""
    out = {}
    for lang in languages:
        tc = PROBES[lang](workdir)
        if tc is None:
            if lang in required:
                tools = ", ".join(RUNNERS[lang].tools)
                raise ToolchainError(f"{lang} was asked for but {tools} is not on {ENV['PATH']}")
            continue
        out[lang] = tc
    return out


# ---- placing files in the image ------------------------------------------------------------------
def chain(path: str) -> tuple[list[tuple[str, str]], str]:
    """``path`` resolved as the kernel resolves it: the symlinks met on the way (each link's
    path and its target as written) and the real path at the end."""
    links: list[tuple[str, str]] = []
    todo = [c for c in path.split("/") if c]
    cur = "/"
    hops = 0
    while todo:
        c = todo.pop(0)
        if c == ".":
            continue
        if c == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, c)
        if os.path.islink(nxt):
            hops += 1
            if hops > 40:
                raise ToolchainError(f"{path}: too many levels of symbolic links")
            target = os.readlink(nxt)
            links.append((nxt, target))
            if target.startswith("/"):
                cur = "/"
            todo = [t for t in target.split("/") if t] + todo
            continue
        cur = nxt
    return links, cur


def _dest(root: Path, path: str) -> Path:
    """Where ``path`` goes under ``root``, its parents made; never through a link that leaves
    the root (only the root's own merged-/usr links, which are relative, are followed)."""
    parent = root
    for c in Path(path).parent.parts[1:]:
        parent = parent / c
        if parent.is_symlink():
            if os.path.isabs(os.readlink(parent)):
                raise ToolchainError(f"placing {path} would follow an absolute link in the image")
        elif not parent.exists():
            parent.mkdir()
    real_root = os.path.realpath(root)
    if not (os.path.realpath(parent) + "/").startswith(real_root + "/"):
        raise ToolchainError(f"{path} would be placed outside the image's root")
    return parent / Path(path).name


def place(root: Path, path: str) -> int:
    """Put ``path`` into the image at the same path, with each link on the way to it (links
    kept as written); returns its bytes. The file is hard-linked where the root is on the same
    file system and the kernel allows it (nothing writes to a placed file: it is only read into
    the tar), else copied."""
    links, real = chain(path)
    for link, target in links:
        dst = _dest(root, link)
        if not os.path.lexists(dst):
            os.symlink(target, dst)
    dst = _dest(root, real)
    if os.path.lexists(dst) or not os.path.isfile(real):
        return 0
    try:
        os.link(real, dst)
    except OSError:  # another file system, or protected_hardlinks for a file not ours
        shutil.copy2(real, dst)
    return os.path.getsize(real)
