"""`pytest handout` as a student runs it: stubs fail with NotImplementedError, the reference passes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.timing import MAX_ROUNDS

ROOT = Path(__file__).resolve().parent.parent


def run_handout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "handout", "-q", "-p", "no:randomly", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_stubs_fail_with_not_implemented() -> None:
    proc = run_handout()
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert " passed" not in proc.stdout.splitlines()[-1]
    problems = load_assignment(hidden=False).problems
    for problem in problems:
        assert f"test_{problem.name}.py" in proc.stdout
    assert proc.stdout.count("NotImplementedError") >= len(problems)


def test_reference_passes() -> None:
    proc = run_handout("--submission", "reference")
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "failed" not in proc.stdout.splitlines()[-1]


def test_bf16_on_cpu_for_dot_problems_explains_the_interpreter_limit() -> None:
    proc = run_handout("--submission", "reference", "-k", "matmul", "--dtype", "bfloat16", "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "interpreter computes tl.dot on bfloat16" in proc.stdout.replace("\n", " ") or "cuda" in proc.stdout.lower()


@pytest.mark.gpu
def test_benchmarks_print_the_grader_method_medians(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    proc = run_handout(
        "--submission",
        "reference",
        "--benchmark-only",
        "-k",
        "softmax and 16384x1024",
        f"--benchmark-json={report}",
        "-p",
        "no:cacheprovider",
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    benches = {b["name"]: b for b in json.loads(report.read_text())["benchmarks"]}
    assert set(benches) == {"16384x1024-fp32[yours]", "16384x1024-fp32[pytorch]"}
    for bench in benches.values():
        stats = bench["stats"]
        # TIMED_S of timed work, or MAX_ROUNDS rounds of a short kernel (an H200: ~37 us either side)
        assert stats["rounds"] >= min(MAX_ROUNDS, 0.25 / stats["median"])
        assert 5e-6 < stats["median"] < 5e-3
        assert 0 < bench["extra_info"]["achieved"] < 6000  # GB/s: under any GPU's memory bandwidth


def test_a_problem_close_to_its_time_limit_is_warned_about_on_a_gpu() -> None:
    """The limit covers everything a problem does: the public cases taking half of it is news."""
    from grader.engine.loading import load_file

    conftest = load_file(ROOT / "handout" / "conftest.py")
    lines: list[str] = []

    class Reporter:
        def write_line(self, text: str, **_: object) -> None:
            lines.append(text)

    conftest.SPENT.update(gelu=150.0, softmax=3.0)
    conftest.HAS_GPU = False
    conftest.pytest_terminal_summary(Reporter())
    assert lines == []  # the interpreter's times say nothing about a GPU's
    conftest.HAS_GPU = True
    conftest.pytest_terminal_summary(Reporter())
    assert len(lines) == 1 and "gelu's public cases took 150 s" in lines[0] and "180 s" in lines[0]


@pytest.mark.parametrize("spelling", ["space", "equals"])
def test_the_submissions_own_conftest_never_runs(tmp_path: Path, spelling: str) -> None:
    """`--submission DIR` (the README's spelling) once made pytest import DIR/conftest.py before
    the handout's guard: a GeLU the grader scores 0 passed every public test."""
    folder = tmp_path / "sub"
    shutil.copytree(ROOT / "examples" / "submissions" / "correct", folder)
    marker = tmp_path / "conftest-ran"
    (folder / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    given = ["--submission", str(folder)] if spelling == "space" else [f"--submission={folder}"]
    done = run_handout(*given, "-k", "gelu")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "passed" in done.stdout and not marker.exists()
