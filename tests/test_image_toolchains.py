"""What ``coevo build-image`` takes of the host's toolchains (``image_toolchains.py``), without an
engine: the files the C++ and Java probes choose, links followed as the kernel follows them, and
a placement that never writes outside the image's root. ``test_docker.py`` and the docker
parameters of ``test_native*.py`` check the image itself."""

from __future__ import annotations

import os

import pytest

from coevo_code.execution.image import BuildError, parse_languages
from coevo_code.execution.image_toolchains import (ToolchainError, chain, place, probe_cpp,
                                                   probe_java)
from conftest import host_has_toolchain


def test_chain_resolves_as_the_kernel_does_and_names_every_link(tmp_path):
    real = tmp_path / "opt" / "jdk" / "bin"
    real.mkdir(parents=True)
    (real / "java").write_text("x")
    (tmp_path / "alt").mkdir()
    os.symlink(str(real / "java"), tmp_path / "alt" / "java")      # absolute, like alternatives
    (tmp_path / "bin").mkdir()
    os.symlink("../alt/java", tmp_path / "bin" / "java")           # relative
    os.symlink("opt/jdk", tmp_path / "home")                        # a directory link, then ..
    for path in (tmp_path / "bin" / "java", tmp_path / "home" / "bin" / ".." / "bin" / "java"):
        links, end = chain(str(path))
        assert end == os.path.realpath(path)
    links, _ = chain(str(tmp_path / "bin" / "java"))
    assert links == [(str(tmp_path / "bin" / "java"), "../alt/java"),
                     (str(tmp_path / "alt" / "java"), str(real / "java"))]


def test_place_keeps_the_links_and_never_writes_outside_the_root(tmp_path):
    host = tmp_path / "host"
    (host / "lib").mkdir(parents=True)
    (host / "lib" / "libx.so.1.2").write_bytes(b"\x7fELF")
    os.symlink("libx.so.1.2", host / "lib" / "libx.so.1")
    root = tmp_path / "root"
    root.mkdir()
    assert place(root, str(host / "lib" / "libx.so.1")) == 4
    inside = root / str(host).lstrip("/") / "lib"
    assert os.readlink(inside / "libx.so.1") == "libx.so.1.2"
    assert (inside / "libx.so.1.2").read_bytes() == b"\x7fELF"
    assert place(root, str(host / "lib" / "libx.so.1")) == 0  # there already
    # an absolute link inside the root would lead the copy out of it: refused, nothing written
    outside = tmp_path / "outside"
    outside.mkdir()
    evil = root / "evil"
    os.symlink(str(outside), evil)
    with pytest.raises(ToolchainError, match="absolute link"):
        place(root, "/evil/x/libx.so.1")
    assert list(outside.iterdir()) == []


def test_languages_option():
    assert parse_languages(None) == (("cpp", "java"), False)
    assert parse_languages("auto") == (("cpp", "java"), False)
    assert parse_languages("python") == ((), True)
    assert parse_languages("java,python") == (("java",), True)
    for bad in ("cpp", "python,cobol", ""):
        with pytest.raises(BuildError, match="--languages"):
            parse_languages(bad)


@pytest.mark.skipif(not host_has_toolchain("cpp"), reason="no g++ on this host")
def test_the_cpp_probe_takes_the_passes_headers_and_static_libraries_of_the_judges_link():
    tc = probe_cpp()
    names = {os.path.basename(p) for p in tc.paths}
    assert {"g++", "cc1plus", "collect2", "as", "ld", "liblto_plugin.so"} <= names
    assert {"libc.a", "libm.a", "libstdc++.a", "libgcc.a", "libgcc_eh.a", "crt1.o",
            "crtbeginT.o"} <= names
    assert any(p.endswith("/bits/stdc++.h") for p in tc.paths)
    assert any(p.endswith("/sys/socket.h") for p in tc.paths)  # the C library's headers
    assert any(p.endswith("/linux/limits.h") for p in tc.paths)  # the kernel's
    assert all(os.path.lexists(p) for p in tc.paths)
    assert tc.version.startswith("g++ ")


@pytest.mark.skipif(not host_has_toolchain("java"), reason="no JDK on this host")
def test_the_java_probe_takes_the_jdk_without_what_programs_never_read():
    tc = probe_java()
    rels = [p for p in tc.paths if "/bin/" in p or "/lib/" in p]
    assert any(p.endswith("/lib/modules") for p in rels)
    assert any(p.endswith("/server/libjvm.so") for p in rels)
    assert any(p.endswith("/bin/javac") for p in rels) and any(p.endswith("/bin/java")
                                                               for p in rels)
    for gone in ("/jmods/", "/legal/", "/man/", "/src.zip", "/ct.sym", "/bin/jshell",
                 "/libawt_xawt.so", "classes_nocoops.jsa"):
        assert not any(gone in p for p in tc.paths), gone
    assert "libjvm.so" in tc.provided
