"""Hostile C++ programs (and compiles), each in its own test, under every launcher: bwrap,
direct and docker (whose image holds the host's g++ and JDK: ``coevo build-image``).

As in test_hostile.py, a program prints ``pwned`` only once its aim is reached and the expected
output is ``pwned``, so an ``ok`` verdict would mean the attack worked; where a call is refused
the program exits 1 (``runtime_error``). Each test also checks the aim directly (the directory
and the canary process are still there, no connection arrived, the servers are the same) and
that no process of the job is left: a compiled program does not carry the executor's token in
its command line, so this suite counts every descendant of the servers instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import executor_fixture, host_has_toolchain

executor = executor_fixture(docker=True)

SECRET = "coevo-native-secret-51c9"
os.environ["COEVO_TEST_SECRET_NATIVE"] = SECRET  # set before any executor starts (import time)

HEAD = ("#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n#include <unistd.h>\n"
        "#include <fcntl.h>\n#include <signal.h>\n#include <sched.h>\n#include <sys/mman.h>\n"
        "#include <sys/socket.h>\n#include <sys/syscall.h>\n#include <sys/ptrace.h>\n"
        "#include <sys/wait.h>\n#include <netinet/in.h>\n#include <arpa/inet.h>\n"
        "#include <pthread.h>\n")


def prog(body: str) -> str:
    return HEAD + "int main(){\n" + body + "\n}\n"


PWNED = 'puts("pwned"); return 0;'
# name: (program, expected outcome). {dir}: a directory outside the sandbox holding a file;
# {port}: a TCP listener of this test on 127.0.0.1; {pid}: a host process of this test's uid.
HOSTILE = {
    "raw_socket_connect": (prog(
        "int s = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0); if (s < 0) return 1;\n"
        "sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons({port});\n"
        "a.sin_addr.s_addr = htonl(0x7f000001);\n"
        "if (connect(s, (sockaddr*)&a, sizeof a) != 0) return 1; " + PWNED), "runtime_error"),
    "fork": (prog("pid_t p = fork(); if (p < 0) return 1; if (p == 0) pause(); " + PWNED),
             "runtime_error"),
    "raw_clone": (prog("long p = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); if (p < 0) return 1;"
                       " if (p == 0) for (;;) {} " + PWNED), "runtime_error"),
    "vfork": (prog("pid_t p = vfork(); if (p < 0) return 1; if (p == 0) _exit(0); " + PWNED),
              "runtime_error"),
    "fork_bomb": (prog("for (;;) fork();"), "timeout"),
    "exec_shell": (prog('execl("/bin/sh", "sh", "-c", "echo pwned", (char*)0); return 1;'),
                   "runtime_error"),
    "execveat_a_system_binary": (prog(
        'int fd = open("/bin/echo", O_RDONLY); if (fd < 0) fd = open("/usr/bin/echo", O_RDONLY);'
        '\nif (fd < 0) return 1; const char* argv[] = {"echo", "pwned", 0};\n'
        'syscall(SYS_execveat, fd, "", argv, (char**)0, 0x1000); return 1;'), "runtime_error"),
    "memfd_exec": (prog('long fd = syscall(SYS_memfd_create, "x", 0); if (fd < 0) return 1; '
                        + PWNED), "runtime_error"),
    "mmap_storm": (prog("size_t total = 0; for (int i = 0; i < 100000; i++) {\n"
                        "  void* p = mmap(0, 1UL << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | "
                        "MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);\n"
                        "  if (p == MAP_FAILED) break; total += 1UL << 30; }\n"
                        "if (total < (8UL << 30)) return 1; " + PWNED), "runtime_error"),
    "mmap_touch": (prog("for (;;) { char* p = (char*)mmap(0, 64 << 20, PROT_READ | PROT_WRITE,"
                        " MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);\n"
                        "  if (p == MAP_FAILED) return 1; memset(p, 1, 64 << 20); }"),
                   "runtime_error"),
    "thread_flood": (prog("for (int i = 0; i < 400; i++) { pthread_t t; pthread_create(&t, 0,"
                          " [](void*) -> void* { for (;;) {} }, 0); }\n"
                          "for (;;) pause();"), "timeout"),
    "write_outside_workdir": (prog('FILE* f = fopen("{dir}/evil.txt", "w"); if (!f) return 1;'
                                   ' fputs("x", f); fclose(f); ' + PWNED), "runtime_error"),
    "write_tmp": (prog('FILE* f = fopen("/tmp/coevo-native-evil.txt", "w"); if (!f) return 1; '
                       + PWNED), "runtime_error"),
    "write_other_roles_dirs": (prog(
        'const char* ps[] = {"../t/evil", "../c/evil.h", "../evil", "/tmp/slot0/t/evil"};\n'
        'for (const char* p : ps) { FILE* f = fopen(p, "w"); if (f) { ' + PWNED + " } }"
        "\nreturn 1;"), "runtime_error"),
    "delete_outside": (prog('if (unlink("{dir}/keep.txt") != 0) return 1; ' + PWNED),
                       "runtime_error"),
    "read_passwd": (prog('FILE* f = fopen("/etc/passwd", "r"); if (!f) return 1; char b[256];'
                         ' fputs(fgets(b, sizeof b, f), stdout); ' + PWNED), "runtime_error"),
    "host_environment": (prog('if (!getenv("COEVO_TEST_SECRET_NATIVE")) return 1; ' + PWNED),
                         "runtime_error"),
    "kill_parent": (prog("if (kill(getppid(), SIGKILL) != 0) return 1; " + PWNED),
                    "runtime_error"),
    "kill_host_process": (prog("if (kill({pid}, SIGKILL) != 0) return 1; " + PWNED),
                          "runtime_error"),
    "ptrace_parent": (prog("if (ptrace(PTRACE_ATTACH, getppid(), 0, 0) != 0) return 1; "
                           + PWNED), "runtime_error"),
    "leave_process_group": (prog("if (setsid() < 0 && setpgid(0, 0) != 0) return 1; " + PWNED),
                            "runtime_error"),
    "raise_own_limits": (prog("rlimit r{RLIM_INFINITY, RLIM_INFINITY};\n"
                              "if (setrlimit(RLIMIT_CPU, &r) != 0 && setrlimit(RLIMIT_AS, &r)"
                              " != 0) return 1; " + PWNED).replace(
        "#include <pthread.h>\n", "#include <pthread.h>\n#include <sys/resource.h>\n"),
                         "runtime_error"),
    "big_file_in_workdir": (prog('FILE* f = fopen("big", "w"); static char b[1 << 20];\n'
                                 "for (int i = 0; i < 300; i++) if (fwrite(b, 1, sizeof b, f) "
                                 "!= sizeof b) return 1; " + PWNED), "output_limit"),
}


def _fill(template: str, **kw) -> str:
    for k, v in kw.items():
        template = template.replace("{" + k + "}", str(v))
    return template


def descendants(pids: list[int]) -> set[int]:
    """Every live process below ``pids`` (zombies left out)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry))
    out, stack = set(), list(pids)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


def need(ex, lang):
    """Skip where this host has no toolchain for ``lang`` (the job is then refused, checked
    here); where it has one, every launcher's sandbox must run the language."""
    if not ex.languages().get(lang, (False,))[0]:
        assert not host_has_toolchain(lang), (
            f"the {ex.launcher.name} sandbox has no {lang} toolchain though this host has one "
            "(docker: rebuild the image with 'coevo build-image')")
        [res] = ex.run([{"language": lang, "programs": ["x"], "tests": []}])
        assert f"'language' {lang!r} cannot run in this sandbox" in res["error"]
        pytest.skip(f"this host has no {lang} toolchain (the job is refused)")


def need_cpp(ex):
    need(ex, "cpp")


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_native_program_is_contained(executor, name, precious, listener, canary):
    need_cpp(executor)
    template, expected = HOSTILE[name]
    program = _fill(template, dir=precious, port=listener.getsockname()[1], pid=canary.pid)
    servers = executor.server_pids()
    procs_before = descendants(servers)
    [res] = executor.run([{"id": name, "language": "cpp", "programs": [program],
                           "tests": [{"input": "", "output": "pwned\n"}], "return_outputs": True,
                           "time_limit_s": 1.0, "memory_limit_mb": 256}])
    assert res["outcomes"] == [[expected]], f"{name}: {res['outcomes']} {res['outputs']}"
    assert canary.poll() is None, "a host process was killed"
    assert precious.is_dir() and (precious / "keep.txt").read_text() == "keep me"
    assert not (precious / "evil.txt").exists()
    assert not Path("/tmp/coevo-native-evil.txt").exists()
    with pytest.raises(BlockingIOError):
        listener.accept()[0].close()
    out = res["outputs"][0][0]
    assert "root:x:0:0" not in out and SECRET not in out
    assert executor.server_pids() == servers, "a server died"
    assert descendants(servers) == procs_before, "a process of the job outlived it"
    [after] = executor.run([{"language": "cpp", "programs": [prog(PWNED)],
                             "tests": [{"input": "", "output": "pwned\n"}]}])
    assert after["outcomes"] == [["ok"]]


def test_a_cell_finds_nothing_of_the_cells_before_it(executor):
    """Each test's run starts in an empty work dir: what the run before left (in its dir, or
    wherever it could write) and the compile's files (source, binary) are not there to read."""
    need_cpp(executor)
    leave = prog('const char* ps[] = {"left.txt", "main.cpp", "main", "../c/main.cpp", '
                 '"../c/main", "../t/left.txt"};\n'
                 'int seen = 0; for (const char* p : ps) if (open(p, O_RDONLY) >= 0) seen++;\n'
                 'const char* ws[] = {"left.txt", "../t/left.txt"};\n'
                 'for (const char* p : ws) { FILE* f = fopen(p, "w"); if (f) fclose(f); }\n'
                 'if (seen) { ' + PWNED + " } return 1;")
    # the same program on three tests in a row, and a second one after it in the same job
    other = "// another program\n" + leave
    [res] = executor.run([{"language": "cpp", "programs": [leave, other],
                           "tests": [{"input": "", "output": "pwned\n"}] * 3}])
    assert res["outcomes"] == [["runtime_error"] * 3] * 2


def test_a_run_cannot_plant_a_header_for_a_later_compile(executor):
    need_cpp(executor)
    plant = prog('const char* ps[] = {"../c/evil.h", "evil.h"};\n'
                 'for (const char* p : ps) { FILE* f = fopen(p, "w"); if (f) { '
                 'fputs("#define EVIL 1\\n", f); fclose(f); } } ' + PWNED)
    use = '#include "evil.h"\n#include <cstdio>\nint main(){ puts("pwned"); }\n'
    [res] = executor.run([{"language": "cpp", "programs": [plant],
                           "tests": [{"input": "", "output": "pwned\n"}]}])
    assert res["outcomes"] == [["ok"]]
    [res] = executor.run([{"language": "cpp", "programs": [use],
                           "tests": [{"input": "", "output": "pwned\n"}]}])
    assert res["outcomes"] == [["compile_error"]]


@pytest.mark.parametrize("source", [
    '#include "/etc/passwd"\nint main(){}',
    '#include "/dev/zero"\nint main(){}',
    # a preprocessor bomb: 2^40 tokens; stopped by the compile's CPU and memory limits
    "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 41)).replace("A0 A0", "x x")
    + "int main(){ int x = 0; A40; }\n",
])
def test_hostile_compiles_end_as_compile_errors(executor, source):
    need_cpp(executor)
    servers = executor.server_pids()
    before = descendants(servers)
    [res] = executor.run([{"language": "cpp", "programs": [source], "compile_time_limit_s": 2,
                           "tests": [{"input": "", "output": ""}], "return_outputs": True}])
    assert res["outcomes"] == [["compile_error"]]
    assert executor.server_pids() == servers
    assert descendants(servers) == before


def test_without_isolation_the_same_attacks_succeed(tmp_path, listener):
    """The checks above can fail: with every layer off, these native attacks reach their aims."""
    from coevo_code.execution import Executor

    d = tmp_path / "victim"
    d.mkdir()
    (d / "keep.txt").write_text("keep me")
    names = ["raw_socket_connect", "delete_outside", "read_passwd", "vfork"]
    progs = [_fill(HOSTILE[n][0], dir=d, port=listener.getsockname()[1]) for n in names]
    with Executor(slots=1, launcher="direct", disable=("seccomp", "landlock"), use_uid=False,
                  allow_unsafe=True) as ex:
        need_cpp(ex)
        [res] = ex.run([{"language": "cpp", "programs": progs, "return_outputs": True,
                         "tests": [{"input": "", "output": "pwned\n"}]}])
    assert res["outcomes"][1] == res["outcomes"][3] == ["ok"], res
    assert "root:" in res["outputs"][2][0] and res["outputs"][2][0].endswith("pwned\n")
    assert res["outputs"][0] == ["pwned\n"], res
    listener.accept()[0].close()
    assert not (d / "keep.txt").exists()


JAVA_HOSTILE = {  # each exits 1 (an uncaught exception) where it is refused
    "exec_shell": 'Runtime.getRuntime().exec(new String[]{"sh", "-c", "echo pwned"}).waitFor();',
    "socket_connect": 'new java.net.Socket("127.0.0.1", {port}).getOutputStream().write(1);',
    "write_outside": 'java.nio.file.Files.writeString(java.nio.file.Path.of("{dir}/evil.txt"),'
                     ' "x");',
    "read_passwd": 'System.out.println(java.nio.file.Files.readString(java.nio.file.Path.of('
                   '"/etc/passwd")));',
}


def test_hostile_java_programs_are_contained(executor, precious, listener, canary):
    need(executor, "java")
    servers = executor.server_pids()
    before = descendants(servers)
    progs = [_fill("public class Main { public static void main(String[] a) throws Exception {"
                   + body + ' System.out.println("pwned"); } }',
                   dir=precious, port=listener.getsockname()[1]) for body in JAVA_HOSTILE.values()]
    [res] = executor.run([{"language": "java", "programs": progs, "return_outputs": True,
                           "tests": [{"input": "", "output": "pwned\n"}]}])
    assert res["outcomes"] == [["runtime_error"]] * len(progs), res
    assert not (precious / "evil.txt").exists()
    with pytest.raises(BlockingIOError):
        listener.accept()[0].close()
    assert "root:x:0:0" not in str(res["outputs"])
    assert canary.poll() is None and executor.server_pids() == servers
    assert descendants(servers) == before
