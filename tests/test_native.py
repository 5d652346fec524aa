"""C++ and Java in the sandbox: verdicts (right, wrong, compile error, time, memory, output,
runtime error) under every launcher, the compile cache, and the job format's `language`.

Each language's programs run as one job per launcher (one compile per program), and each test
below checks one row of it, so the suite pays each compile once. Every launcher runs them with the
host's toolchain: bwrap and direct from the host's /usr, docker from its image (``coevo
build-image`` puts g++ and the JDK into it), so the docker parameter asserts the same verdicts.
Only where the host itself lacks a toolchain is the job refused with its one-line error, and the
tests of that language skip (``test_docker.py`` checks the refusal of an image built without
toolchains)."""

from __future__ import annotations

import pytest

from coevo_code.execution import Executor, JobError, parse_job
from coevo_code.sandbox.native import java_main
from conftest import executor_fixture, host_has_toolchain

executor = executor_fixture(docker=True)

A_PLUS_B = [{"input": "1 2\n", "output": "3\n"}, {"input": "1000000000 1000000000\n",
                                                  "output": "2000000000\n"}]
LIMITS = {"time_limit_s": 1.0, "memory_limit_mb": 256, "output_limit_mb": 1.0}

CPP_SUM = '#include <cstdio>\nint main(){long long a,b; scanf("%lld %lld",&a,&b);\nBODY}\n'


def cpp_sum(body: str) -> str:
    return CPP_SUM.replace("BODY", body)


CPP = {
    "right": (cpp_sum('printf("%lld\\n",a+b);'), "ok"),
    "right_bits_iostream": ("#include <bits/stdc++.h>\nusing namespace std;\nint main(){"
                            "ios::sync_with_stdio(false); long long a,b; cin>>a>>b; "
                            "vector<long long> v{a,b}; cout<<accumulate(v.begin(),v.end(),0LL)"
                            "<<endl;}", "ok"),
    "right_onlinejudge_macro": (cpp_sum('#ifdef ONLINE_JUDGE\nprintf("%lld\\n",a+b);\n'
                                        '#endif\n'), "ok"),
    # a judge's stack: 10^6 frames of ~100 bytes pass (the default 8 MiB would not)
    "deep_recursion": ("#include <cstdio>\nint f(int n){volatile char pad[96]; pad[0]=n&1; "
                       "return n==0?0:f(n-1)+pad[0];}\nint main(){long long a,b; "
                       "scanf(\"%lld %lld\",&a,&b); if(f(1000000)!=500000) return 1; "
                       "printf(\"%lld\\n\",a+b);}", "ok"),
    "wrong": (cpp_sum('printf("%lld\\n",a-b);'), "wrong_answer"),
    "compile_error": ("int main( {", "compile_error"),
    "undeclared": ("int main(){ return undefined_name; }", "compile_error"),
    "infinite_loop": ("int main(){volatile unsigned x=0; for(;;) x++;}", "timeout"),
    "sleep": ("#include <unistd.h>\nint main(){sleep(100);}", "timeout"),
    "memory_new": ("#include <cstring>\nint main(){for(;;){char*p=new char[1<<20]; "
                   "memset(p,1,1<<20);}}", "memory_limit"),
    "memory_one_block": ("#include <cstdio>\nint main(){char* volatile p=new char[(size_t)2<<30];"
                         " p[0]=1; printf(\"%d\",p[0]);}", "memory_limit"),
    "output": ("#include <cstdio>\nint main(){for(;;) fputs(\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
               "\\n\", stdout);}", "output_limit"),
    "segfault": ("int main(){volatile int*p=nullptr; *p=1;}", "runtime_error"),
    "abort": ("#include <cstdlib>\nint main(){abort();}", "runtime_error"),
    "uncaught_exception": ("int main(){throw 1;}", "runtime_error"),
    "exit_3": (cpp_sum('printf("%lld\\n",a+b); return 3;'), "runtime_error"),
    # the sandbox's setup-failure status, exited by the program itself: its own error
    "exit_121": (cpp_sum('printf("%lld\\n",a+b); return 121;'), "runtime_error"),
}

JAVA_READ = ("import java.io.*;\nimport java.util.*;\n%s {\n public static void main(String[] x)"
             " throws IOException {\n  BufferedReader r = new BufferedReader(new "
             "InputStreamReader(System.in));\n  StringTokenizer t = new StringTokenizer("
             "r.readLine());\n  long a = Long.parseLong(t.nextToken()), b = Long.parseLong("
             "t.nextToken());\n  %s\n }\n}\n")
JAVA = {
    "right": (JAVA_READ % ("public class Main", "System.out.println(a + b);"), "ok"),
    "right_other_class_name": (JAVA_READ % ("public class Solution",
                                            "System.out.println(a + b);"), "ok"),
    "right_not_public": ("// public class Decoy {}\n" + JAVA_READ % (
        "class Codeforces", "System.out.println(a + b);"), "ok"),
    "right_helper_classes": ("import java.util.*;\npublic class Main {\n static class Pair "
                             "{ long a, b; Pair(long a, long b) { this.a = a; this.b = b; } }\n"
                             " public static void main(String[] x) {\n  Scanner s = new "
                             "Scanner(System.in);\n  Pair p = new Pair(s.nextLong(), "
                             "s.nextLong());\n  System.out.println(p.a + p.b);\n }\n}\n", "ok"),
    # Codeforces runs Java with -DONLINE_JUDGE=true, and solutions read it (1060_A's Java 48)
    "right_online_judge_property": (JAVA_READ % (
        "public class Main", 'if (System.getProperty("ONLINE_JUDGE") != null) '
        "System.out.println(a + b);"), "ok"),
    "wrong": (JAVA_READ % ("public class Main", "System.out.println(a - b);"), "wrong_answer"),
    "compile_error": ("public class Main { public static void main(String[] a) { int x = } }",
                      "compile_error"),
    "no_main": ("public class Main { }", "compile_error"),
    "infinite_loop": ("public class Main { public static void main(String[] a) { long x = 0; "
                      "while (true) x++; } }", "timeout"),
    "memory": ("import java.util.*;\npublic class Main { public static void main(String[] a) {"
               " List<long[]> l = new ArrayList<>(); while (true) l.add(new long[1 << 20]); } }",
               "memory_limit"),
    "output": ("public class Main { public static void main(String[] a) { StringBuilder s = new "
               "StringBuilder(); for (int i = 0; i < 1000; i++) s.append('x'); for (int i = 0; "
               "i < 3000; i++) System.out.println(s); } }", "output_limit"),
    "exception": (JAVA_READ % ("public class Main", "throw new RuntimeException(\"no\");"),
                  "runtime_error"),
    "stack_overflow": ("public class Main { static int f(int n) { return f(n + 1) + 1; } "
                       "public static void main(String[] a) { System.out.println(f(0)); } }",
                       "runtime_error"),
    "exit_121": (JAVA_READ % ("public class Main", "System.out.println(a + b); "
                                                   "System.exit(121);"), "runtime_error"),
}

_RUNS: dict = {}


def run_language(ex: Executor, lang: str, programs: dict) -> dict | None:
    """Every program of ``programs`` in one job under ``ex`` (once per executor and language):
    {name: (outcomes, outputs)}, and the compiles it took; None where the sandbox refused the
    language, which it may only where this host has no toolchain for it, after checking the
    refusal."""
    key = (ex.token, lang)  # not id(ex): a closed executor's id may come back for the next one
    if key not in _RUNS:
        names = list(programs)
        before = ex.stats()["compiles"]
        [res] = ex.run([{"id": lang, "language": lang, "programs": [programs[n][0] for n in names],
                         "tests": A_PLUS_B, "return_outputs": True, **LIMITS}])
        if "error" in res:
            assert not host_has_toolchain(lang), (
                f"the {ex.launcher.name} sandbox refused {lang} though this host has its "
                f"toolchain (docker: rebuild the image with 'coevo build-image'): {res['error']}")
            assert not ex.languages()[lang][0], res
            assert f"'language' {lang!r} cannot run in this sandbox" in res["error"], res
            _RUNS[key] = None
        else:
            rows = {n: (res["outcomes"][i], res["outputs"][i]) for i, n in enumerate(names)}
            _RUNS[key] = (rows, ex.stats()["compiles"] - before)
    return _RUNS[key]


def _row(executor, lang, programs, name):
    got = run_language(executor, lang, programs)
    if got is None:
        pytest.skip(f"this host has no {lang} toolchain (the job is refused)")
    return got[0][name]


@pytest.mark.parametrize("name", list(CPP))
def test_cpp_verdicts(executor, name):
    outcomes, outputs = _row(executor, "cpp", CPP, name)
    assert outcomes == [CPP[name][1]] * 2, (name, outcomes, outputs)
    if CPP[name][1] == "ok":
        assert outputs == ["3\n", "2000000000\n"]


@pytest.mark.parametrize("name", list(JAVA))
def test_java_verdicts(executor, name):
    outcomes, outputs = _row(executor, "java", JAVA, name)
    assert outcomes == [JAVA[name][1]] * 2, (name, outcomes, outputs)


def test_each_program_compiles_once_for_all_its_tests(executor):
    """n programs x t tests: n compiles (the judge's cache, keyed by the source), and the same
    job again compiles nothing."""
    if run_language(executor, "cpp", CPP) is None:
        pytest.skip("this host has no C++ toolchain")
    assert run_language(executor, "cpp", CPP)[1] == len(CPP)
    progs = [cpp_sum(f'printf("%lld\\n",a+b+{k});') for k in range(3)]
    tests = [{"input": f"{i} {i}\n", "output": f"{2 * i}\n"} for i in range(12)]
    before = executor.stats()["compiles"]
    [res] = executor.run([{"language": "cpp", "programs": progs, "tests": tests}])
    assert executor.stats()["compiles"] - before == 3
    assert res["passed"][0] == [True] * 12 and not any(res["passed"][1] + res["passed"][2])
    before = executor.stats()["compiles"]
    [again] = executor.run([{"language": "cpp", "programs": progs, "tests": tests}])
    assert again["outcomes"] == res["outcomes"]
    assert executor.stats()["compiles"] == before


def test_java_main_class_is_found_in_the_class_files():
    hello = (b"\xca\xfe\xba\xbe\x00\x04main\x00\x16([Ljava/lang/String;)V")
    assert java_main({"A.class": b"\xca\xfe", "B.class": hello, "B$1.class": hello}) == "B"
    assert java_main({"A.class": b"\xca\xfe"}) is None


def test_language_field_is_validated_in_one_line():
    assert parse_job({"programs": ["print(1)"]}).language == "python"
    assert parse_job({"programs": ["x"], "language": "cpp"}).language == "cpp"
    for bad, says in [({"language": "python2"}, "'language' must be one of python, cpp, java"),
                      ({"language": 3}, "'language' must be one of"),
                      ({"language": "cpp", "kind": "functional"}, "runs stdio jobs only"),
                      ({"language": "java", "input_mode": "file"}, "Python programs only"),
                      ({"language": "cpp", "compile_time_limit_s": 0}, "compile_time_limit_s")]:
        with pytest.raises(JobError, match=says.replace("(", r"\(")) as e:
            parse_job({"programs": ["x"], **bad})
        assert "\n" not in str(e.value)


def test_python_units_are_unchanged_by_the_language_field():
    """A Python job's request to the judge is what it was before languages (no new key)."""
    from coevo_code.execution.core import job_units
    job = parse_job({"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]})
    [unit] = job_units(0, job, 8)
    assert "language" not in unit.request and "compile_time" not in unit.request
