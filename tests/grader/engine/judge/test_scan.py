"""The static scan: known patterns with file and line, no noise on honest code, no way to stop it."""

from __future__ import annotations

import os
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.judge.scan import MAX_FILE_BYTES, scan_submission

ROOT = Path(__file__).resolve().parents[4]
CORPUS = ROOT / "tests" / "adversarial"


def scan(tmp_path: Path, **files: str) -> list[tuple[str, int, str]]:
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return [(f.file, f.line, f.rule) for f in scan_submission(tmp_path)]


def test_each_pattern_is_reported_with_file_and_line(tmp_path: Path) -> None:
    found = scan(
        tmp_path,
        **{
            "gelu.py": """\
                import sys, gc, ctypes
                import torch
                time_ = __import__("time")
                frame = sys._getframe(1).f_back
                objs = gc.get_objects()
                torch.allclose = lambda *a: True
                secret = open("/proc/1/environ").read()
                import os
                key = os.environ.get("GRADER_SECRET")
                torch.autograd._disable_profiler()
                sys.modules["grader.engine.harness.serve"] = None
                eval("1 + 1")
                s = torch.cuda.Stream()
            """,
            "helpers/util.py": """\
                from grader.engine.judge.checks import compare
                from reference.gelu import triton_gelu
            """,
        },
    )
    expected = {
        ("gelu.py", 1, "gc-walk"),
        ("gelu.py", 1, "native-code"),
        ("gelu.py", 3, "dynamic-import"),
        ("gelu.py", 4, "frame-walk"),
        ("gelu.py", 5, "gc-walk"),
        ("gelu.py", 6, "monkeypatch"),
        ("gelu.py", 7, "file-access"),
        ("gelu.py", 7, "suspicious-string"),
        ("gelu.py", 9, "env-probe"),
        ("gelu.py", 10, "profiler-access"),
        ("gelu.py", 11, "monkeypatch"),
        ("gelu.py", 11, "harness-access"),
        ("gelu.py", 12, "dynamic-code"),
        ("gelu.py", 13, "side-stream"),
        ("helpers/util.py", 1, "grader-import"),
        ("helpers/util.py", 2, "reference-import"),
    }
    assert expected <= set(found), sorted(expected - set(found))


def test_namespace_and_mount_attempts_are_reported(tmp_path: Path) -> None:
    found = scan(
        tmp_path,
        **{
            "gelu.py": """\
                import ctypes, os, subprocess
                libc = ctypes.CDLL(None)
                libc.unshare(0x10000000)
                os.setns(3, 0)
                subprocess.run(["unshare", "-Urm", "true"])
                subprocess.run("mount --bind /etc /tmp/x", shell=True)
                libc.amount(1)
            """,
        },
    )
    namespace = sorted(line for file, line, rule in found if rule == "namespace")
    assert namespace == [3, 4, 5], found


def test_honest_code_has_no_findings() -> None:
    for folder in (ROOT / "examples" / "submissions" / "correct", ROOT / "student_template", ROOT / "reference"):
        assert scan_submission(folder) == [], folder


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(e, id=e["name"])
        for e in tomllib.loads((CORPUS / "corpus.toml").read_text())["attack"]
        if e.get("findings") and "make" not in e
    ],
)
def test_the_corpus_is_flagged_where_its_table_says(entry: dict) -> None:
    """The scan alone, on every corpus submission that the table expects it to flag."""
    findings = scan_submission(CORPUS / "submissions" / entry["name"])
    module = f"{load_assignment(hidden=False).problem(entry['problem']).module}.py"
    rules = {f.rule for f in findings if f.file == module}
    assert set(entry["findings"]) <= rules, (entry["findings"], sorted(rules))
    assert (
        all(f.line > 0 for f in findings if f.file == module and f.rule != "syntax-error")
        or entry["name"] == "syntax-error"
    )


def test_syntax_error_is_reported_at_its_line() -> None:
    findings = scan_submission(CORPUS / "submissions" / "syntax-error")
    assert [(f.file, f.line, f.rule) for f in findings] == [("softmax.py", 4, "syntax-error")]


def test_links_fifos_binaries_and_huge_files_are_reported_not_read(tmp_path: Path) -> None:
    (tmp_path / "gelu.py").symlink_to(ROOT / "reference" / "gelu.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "softmax.py")
    (tmp_path / "matmul.py").write_bytes(b"\x7fELF" + b"\0" * 64)
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_FILE_BYTES // 6 + 10))
    (tmp_path / "helper.so").write_bytes(b"\x7fELF")
    start = time.monotonic()
    found = {(f.file, f.rule): f.message for f in scan_submission(tmp_path)}
    assert time.monotonic() - start < 5, "nothing blocked, nothing huge was read"
    assert ("gelu.py", "symlink") in found and ("zero.py", "symlink") in found
    assert found[("softmax.py", "unreadable")] == "not a regular file"
    assert ("matmul.py", "native-code") in found and ("helper.so", "native-code") in found
    assert "too large to scan" in found[("big.py", "unreadable")]
    assert not any(f == "gelu.py" and r != "symlink" for f, r in found), "the link target was not scanned"


def test_pathological_sources_cannot_stop_the_scan(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "long.py").write_text("x = " + " + ".join(["1"] * 200_000) + "\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\0\n")
    (tmp_path / "latin.py").write_bytes(b"s = '\xff\xfe'\n")
    findings = {f.file: f.rule for f in scan_submission(tmp_path)}
    assert findings.get("deep.py") in ("syntax-error", "unreadable")
    assert findings.get("nul.py") in ("syntax-error", "unreadable")
    assert "long.py" not in findings or findings["long.py"] in ("syntax-error", "unreadable")


def test_reading_triton_interpret_by_name_is_not_an_env_probe(tmp_path: Path) -> None:
    """The tutorials choose block sizes by TRITON_INTERPRET: honest, and a TA need not look at it."""
    (tmp_path / "gelu.py").write_text(
        "import os\n"
        "A = os.environ.get('TRITON_INTERPRET', '0')\n"
        "B = os.getenv('TRITON_INTERPRET')\n"
        "C = os.environ['TRITON_INTERPRET'] if 'TRITON_INTERPRET' in os.environ else None\n"
        "D = os.environ.get('GRADER_SECRET')\n"
    )
    findings = scan_submission(tmp_path)
    assert [(f.line, f.rule) for f in findings if f.rule == "env-probe"] == [(5, "env-probe")], findings
    assert all(f.line == 5 for f in findings), findings


def test_a_long_attribute_chain_costs_linear_time(tmp_path: Path) -> None:
    """One 2 MiB helper of `a.b.b.b...` took 110 s and 1.4 GB in the orchestrator (quadratic)."""
    import time

    from grader.engine.judge.scan import MAX_FILE_BYTES, scan_submission

    line = "x = a" + ".b" * 2000 + "\n"  # about as deep as Python's parser takes, as many lines as fit
    (tmp_path / "helper.py").write_text(line * (MAX_FILE_BYTES // len(line)))
    (tmp_path / "gelu.py").write_text("import os\nos.environ['X'] = '1'\n")  # the honest rules still fire
    started = time.monotonic()
    findings = scan_submission(tmp_path)
    assert time.monotonic() - started < 60  # seconds on a loaded 2-core machine; quadratic, it was hours
    assert any(f.file == "gelu.py" and f.rule == "env-probe" for f in findings)


def test_the_scan_stops_at_its_budget_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.engine.judge import scan

    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("import os\nos.environ['X'] = '1'\n")
    assert {f.file for f in scan.scan_submission(tmp_path) if f.rule == "env-probe"} == {"a.py", "b.py"}
    monkeypatch.setattr(scan, "SCAN_BUDGET_S", -1.0)
    (stopped,) = scan.scan_submission(tmp_path)
    assert stopped.rule == "scan-budget" and stopped.file == "a.py"


def test_prose_is_not_a_suspicious_string_but_data_is(tmp_path: Path) -> None:
    # a docstring or message that ends a sentence with "the reference." is prose; a module path in
    # data, or a docstring the code reads back, is not
    honest = scan(
        tmp_path / "honest",
        **{
            "gelu.py": '''\
                """GeLU by the tanh approximation, within 1e-5 of the reference.

                The secret is a good block size."""


                def triton_gelu(x):
                    """As the reference."""
                    assert x.is_contiguous(), "contiguous inputs, as the reference."
                    return x
            ''',
        },
    )
    assert [f for f in honest if f[2] == "suspicious-string"] == []
    hostile = scan(
        tmp_path / "hostile",
        **{
            "gelu.py": '''\
                """/proc/self/environ"""
                import importlib
                where = importlib.import_module("reference.gelu")
                path = open(__doc__).read()
            ''',
            "softmax.py": '''\
                import inspect


                def f():
                    """reference/softmax.py"""


                source = open(inspect.getdoc(f)).read()
            ''',
        },
    )
    strings = {(file, line) for file, line, rule in hostile if rule == "suspicious-string"}
    assert {("gelu.py", 1), ("gelu.py", 3), ("softmax.py", 5)} <= strings, hostile


def test_numpy_for_a_constant_is_allowed_and_a_tensor_moved_into_it_is_reported(tmp_path: Path) -> None:
    honest = scan(
        tmp_path / "honest",
        **{
            "gelu.py": """\
                import numpy as np

                SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
                EPS = np.finfo(np.float32).eps
            """,
        },
    )
    assert [f for f in honest if f[2] == "numpy"] == []
    hostile = scan(
        tmp_path / "hostile",
        **{
            "gelu.py": """\
                import numpy as numeric
                from numpy import asarray as grab
                import torch


                def triton_gelu(x):
                    a = x.cpu().numpy()
                    b = numeric.asarray(x.cpu())
                    c = grab(x.cpu())
                    return torch.from_numpy(a + b + c)
            """,
        },
    )
    assert {line for file, line, rule in hostile if rule == "numpy"} == {7, 8, 9, 10}, hostile


def test_code_generated_past_the_profiler_is_reported(tmp_path: Path) -> None:
    """Inductor used directly, AOT export, jiterator and C++ extensions: each at its line; torch.compile
    itself (run eagerly in a graded call) is not."""
    found = scan(
        tmp_path,
        **{
            "gelu.py": """\
                import torch
                from torch._inductor import compile as inductor_compile
                import torch.utils.cpp_extension
                fn = torch.cuda.jiterator._create_jit_fn("template <typename T> T f(T x) { return x; }")
                ext = torch.utils.cpp_extension.load_inline("m", "")
                model = torch._export.aot_load("model.so", "cpu")
                fast = torch.compile(lambda x: x)
            """
        },
    )
    assert set(found) == {
        ("gelu.py", 2, "generated-code"),
        ("gelu.py", 3, "native-code"),
        ("gelu.py", 4, "generated-code"),
        ("gelu.py", 5, "native-code"),
        ("gelu.py", 6, "generated-code"),
    }


def test_triton_internals_are_reported(tmp_path: Path) -> None:
    """A builtin of the submission's own and the interpreter's arrays behind a tensor: code that acts
    one way under the GPU compiler and another under the interpreter."""
    found = scan(
        tmp_path,
        **{
            "gelu.py": """\
                def act(x, _semantic=None):
                    x.handle.data[:] = 0
                    return x
                act.__triton_builtin__ = True
                handle = x.data  # an ordinary .data is not
            """
        },
    )
    assert set(found) == {("gelu.py", 2, "triton-internals"), ("gelu.py", 4, "triton-internals")}
