"""report.html for a student: failures first, one message per repeated error, the write-up linked,
their leaderboard name, and what the staff will look at."""

from __future__ import annotations

import pytest

from grader.course.leaderboard.names import SALT_ENV, leaderboard_alias, pseudonym
from grader.engine.records.model import (
    AssignmentRef,
    Performance,
    ProblemResult,
    Result,
    RunEnvironment,
    SubmissionRef,
    TestResult,
)
from grader.engine.records.report import failure_groups, render_html

TRACEBACK = "could not load gelu.triton_gelu: ModuleNotFoundError: No module named 'helpers'"


def result() -> Result:
    broken = [
        TestResult(name=f"gelu: case{i}", status="error", score=0, max_score=1.25, message=TRACEBACK) for i in range(8)
    ]
    wrong = TestResult(name="softmax: ragged", status="failed", score=0, max_score=5, message="3 elements differ")
    right = [TestResult(name=f"softmax: ok{i}", status="passed", score=5, max_score=5) for i in range(2)]
    fast = Performance(
        status="measured",
        score=10,
        max_score=10,
        ratio_geomean=2.1,
        review="rows: speed ratio 2.1 is above the review bound 1.5",
    )
    return Result(
        assignment=AssignmentRef(name="triton-kernels", version="1"),
        submission=SubmissionRef(path="x", sha256="0" * 64, student="s-042"),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3"),
        score=20,
        max_score=40,
        duration_s=1,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[
            ProblemResult(
                name="softmax",
                title="Softmax",
                writeup_section="assignment/README.md#2-softmax",
                score=20,
                max_score=25,
                status="partial",
                tests=[*right, wrong],
                performance=fast,
            ),
            ProblemResult(
                name="matmul",
                title="Matmul",
                writeup_section="assignment/README.md#3-matmul",
                score=0,
                max_score=0,
                status="passed",
            ),
            ProblemResult(
                name="gelu",
                title="GeLU",
                writeup_section="assignment/README.md#1-gelu",
                score=0,
                max_score=10,
                status="error",
                tests=broken,
            ),
        ],
    )


def test_failures_first_and_a_repeated_error_once() -> None:
    html = render_html(result())
    assert html.index('id="gelu"') < html.index('id="softmax"') < html.index('id="matmul"')
    assert html.count("No module named &#39;helpers&#39;") == 1 and "×8, same message" in html
    section = html[html.index('id="softmax"') :]
    assert section.index("3 elements differ") < section.index("softmax: ok0")  # the failure before the passes


def oob(program: int, count: int) -> str:
    return (
        f"call 1 of 2: OutOfBounds: tl.load in program ({program}, 0, 0) touches memory outside every tensor "
        f'({count} of 1024 addresses)\n  File "gelu.py", line 11, in _gelu'
    )


def test_errors_differing_only_in_numbers_are_one_group_with_each_message_kept() -> None:
    tests = [
        TestResult(name="gelu: ragged", status="failed", score=0, max_score=1, message=oob(1, 365)),
        TestResult(name="gelu: 1d", status="failed", score=0, max_score=1, message=oob(0, 924)),
        TestResult(name="gelu: at 0x7f3a2c001000", status="failed", score=0, max_score=1, message=oob(0, 924)),
        TestResult(name="gelu: wrong", status="failed", score=0, max_score=1, message="3 elements differ"),
        TestResult(
            name="gelu: oob store", status="failed", score=0, max_score=1, message=oob(2, 5).replace("load", "store")
        ),
    ]
    groups = failure_groups(tests)
    assert [len(g.tests) for g in groups] == [3, 1, 1]  # a store is another error than a load
    first = groups[0]
    assert first.message == oob(1, 365)
    assert [(t.name, t.message) for t in first.variants] == [
        ("gelu: 1d", oob(0, 924)),
        ("gelu: at 0x7f3a2c001000", oob(0, 924)),
    ]
    assert not groups[1].variants and not groups[2].variants

    changed = result()
    changed.problems[1].tests = tests  # matmul; gelu keeps its eight identical errors
    html = render_html(changed)
    assert (
        "×3, same error, numbers differ" in html
        and "the other 2 tests' messages (the same error, other numbers)" in html
    )
    assert html.count("(924 of 1024 addresses)") == 2 and html.count("(365 of 1024 addresses)") == 1
    assert "×8, same message" in html  # identical messages keep their label


def test_a_compile_only_case_is_labelled() -> None:
    changed = result()
    softmax = changed.problems[0]
    softmax.tests.append(TestResult(name="softmax: huge", status="passed", score=0, max_score=5, compile_only=True))
    softmax.tests.append(TestResult(name="softmax: huge2", status="failed", score=0, max_score=5, compile_only=True))
    html = render_html(changed)
    assert 'softmax: huge <span class="meta">(compile-only)</span>' in html
    assert 'softmax: huge2 <span class="meta">(compile-only)</span>' in html
    assert "softmax: ok0 <span" not in html


def test_failing_problems_carry_their_writeup_section() -> None:
    """The section itself is embedded: a link relative to the repository breaks next to the report."""
    html = render_html(result())
    assert "## 1. GeLU" in html and "## 2. Softmax" in html and "online softmax" in html
    assert "## 3. Matmul" not in html  # passed: no pointer needed
    assert 'href="assignment/README.md' not in html


def test_the_student_finds_their_leaderboard_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # the alias is the class's (the course layer passes it); the engine's own report names none
    assert "Your name on the leaderboard" not in render_html(result())
    monkeypatch.delenv(SALT_ENV, raising=False)
    assert pseudonym("s-042", "triton-kernels") in render_html(result(), leaderboard_alias("s-042", "triton-kernels"))
    monkeypatch.setenv(SALT_ENV, "private key")
    html = render_html(result(), leaderboard_alias("s-042", "triton-kernels"))
    assert pseudonym("s-042", "private key") in html and pseudonym("s-042", "triton-kernels") not in html
    assert leaderboard_alias(None, "triton-kernels") is None


def test_a_review_is_shown_with_its_reason() -> None:
    html = render_html(result())
    assert "softmax: review" in html and "speed ratio 2.1 is above the review bound" in html


def test_a_shapes_interval_and_a_throttled_window_are_shown() -> None:
    from grader.engine.records.model import GpuState, ShapeTiming

    graded = result()
    shape = ShapeTiming(
        name="rows",
        case="4096x4096",
        student_ms=1.0,
        reference_ms=0.9,
        ratio=0.9,
        ratio_low=0.88,
        ratio_high=0.92,
        alternations=3,
        stopped="settled",
        gpu_state=GpuState(
            sm_clock_mhz=[1500, 1980],
            memory_clock_mhz=[3201, 3201],
            temperature_c=84,
            power_w=690.0,
            throttle_reasons=["hw_thermal_slowdown"],
            retimed_windows=2,
            throttled=True,
        ),
    )
    perf = graded.problems[0].performance
    assert perf is not None
    perf.shapes, perf.score_low, perf.score_high = [shape], 9.5, 10.0
    html = render_html(graded)
    assert "95% interval 0.880–0.920, 3 alternations, settled" in html
    assert "throttled while timed: marked for review" in html and "hw_thermal_slowdown" in html
    assert "intervals allow 9.5–10" in html


def test_a_profile_lists_kernels_with_their_share_in_the_report_and_the_console() -> None:
    import io

    from rich.console import Console

    from grader.engine.records.console import print_profiles
    from grader.engine.records.model import KernelTime, ShapeProfile

    graded = result()
    graded.problems[0].profile = [
        ShapeProfile(
            name="rows",
            case="4096x4096",
            wall_ms=1.2,
            kernels_ms=1.0,
            kernels=[
                KernelTime(name="softmax_kernel", calls=1, time_ms=0.75),
                KernelTime(name="<x>", calls=2, time_ms=0.25),
            ],
        ),
        ShapeProfile(name="cols", error="not profiled: the worker died"),
    ]
    html = render_html(graded)
    assert "Profile: where one warm call" in html and "<code>softmax_kernel</code>" in html and "75%" in html
    assert "&lt;x&gt;" in html and "not profiled: the worker died" in html  # kernel names are escaped
    buffer = io.StringIO()
    print_profiles(graded, Console(file=buffer, width=200))
    text = buffer.getvalue()
    assert "softmax_kernel" in text and "75%" in text and "1.2 ms on the" in text


def test_nsight_computes_counters_show_beside_the_profile_or_why_not() -> None:
    import io

    from rich.console import Console

    from grader.engine.records.console import print_profiles
    from grader.engine.records.model import KernelCounters, ShapeProfile

    graded = result()
    counted = KernelCounters(
        name="<softmax_kernel>", launches=2, time_ms=0.75, sm_pct=31.4, memory_pct=88.6, dram_gb_s=4012.0,
        occupancy_pct=None, registers=40,
    )  # fmt: skip
    graded.problems[0].profile = [
        ShapeProfile(name="rows", kernels_ms=0.75, counters=[counted]),
        ShapeProfile(name="cols", counters_note="Nsight Compute: this machine's driver keeps the counters"),
    ]
    html = render_html(graded)
    assert "kernel (Nsight Compute)" in html and "&lt;softmax_kernel&gt;" in html and "<td>89</td>" in html
    assert "<td>4012</td>" in html and "<td>-</td>" in html and "keeps the counters" in html
    buffer = io.StringIO()
    print_profiles(graded, Console(file=buffer, width=220))
    text = buffer.getvalue()
    assert "Nsight Compute, the same call" in text and "4012" in text and "89" in text and "keeps the counters" in text


def test_a_problem_crowded_out_by_other_gradings_says_so() -> None:
    graded = result()
    assert "while the GPU was shared with other gradings" not in render_html(graded)
    graded.problems[0].contended = "out_of_memory"
    html = render_html(graded)
    assert "ran out of GPU memory while the GPU was shared with other gradings" in html
    graded.problems[0].contended = "time_limit"
    assert "ran out of its time limit while the GPU was shared" in render_html(graded)
