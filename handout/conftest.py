"""pytest plugin for the public handout tests: which submission, which device, which cases.

`pytest handout` tests student_template/; `pytest handout --submission PATH` tests another folder.
Without a CUDA GPU the kernels run through Triton's interpreter on the small CPU cases: this file
sets TRITON_INTERPRET=1 before Triton is imported, so there is nothing for you to set.

The header says which torch and Triton are graded with when yours differ (and so does a warning),
and your submission may import only what the grader has: the same import policy as the grader's
workers is installed before your files are imported (grader/engine/harness/imports.py).

Each problem's cases run in a process of their own, as the grader runs each problem in a worker:
a kernel that crashes (a segfault) or hangs past the problem's time limit fails the test it was
running, with the signal and your line, and the run goes on (grader/engine/handout/isolation.py). Timing
(`--benchmark-only`, on a GPU) runs in pytest's own process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from grader.engine.assignment.load import load_assignment  # noqa: E402
from grader.engine.handout import isolation, options  # noqa: E402
from grader.engine.handout.support import (  # noqa: E402  (after TRITON_INTERPRET)
    REPLAY,
    BenchmarkRunner,
    CaseRunner,
    cases_for,
    memory_verdict,
)
from grader.engine.harness import imports  # noqa: E402
from grader.engine.spec import versions  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    # pyproject.toml loads grader.engine.handout.options first (-p); this covers a run without its addopts
    options.register(parser)


def pytest_report_header(config: pytest.Config) -> list[str]:
    device = (
        torch.cuda.get_device_name()
        if HAS_GPU
        else "CPU, through Triton's interpreter (TRITON_INTERPRET=1; small cases)"
    )
    return [f"submission: {config.getoption('--submission')}", f"device: {device}", *_environment_lines()]


def _environment_lines() -> list[str]:
    env = versions.graded()
    graded = (
        f"graded with torch {env.torch}, triton {env.triton}; imports allowed: the standard library, your "
        f"own modules, {', '.join(env.allowed_imports)}"
    )
    diffs = versions.differences(env)
    if not diffs:
        return [f"environment: {graded} (the same here)"]
    return [
        f"environment: {graded}",
        f"WARNING: not the grading versions: {'; '.join(diffs)}",
        f"  to test as graded: {versions.install_command(env)}",
    ]


def pytest_configure(config: pytest.Config) -> None:
    options.submission_folder(config)
    if not config.option.collectonly and not config.getoption("benchmark_only", False):
        isolation.start_early()  # the problems' processes come from it: its imports run beside collection
    diffs = versions.differences(versions.graded())
    if diffs:
        message = (
            f"not the grading versions: {'; '.join(diffs)}. Results here may differ from the grade "
            f"({versions.WRITEUP}); to test as graded: {versions.install_command(versions.graded())}"
        )
        config.issue_config_time_warning(pytest.PytestWarning(message), stacklevel=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failure that only a Triton other than the grading one causes gets the hint the grader gives."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        note = versions.hint(str(report.longrepr))
        if note:
            report.sections.append(("Triton versions", note))
    problem = getattr(getattr(item, "module", None), "PROBLEM", None)
    if problem and "bench_case" not in getattr(item, "fixturenames", ()):
        SPENT[problem] = SPENT.get(problem, 0.0) + report.duration


#: seconds each problem's correctness tests took here (import, compile and autotune included)
SPENT: dict[str, float] = {}
#: past this share of a problem's time limit, the public cases alone are worth a warning
LIMIT_WARNING_SHARE = 0.5


#: the memory estimates of this run, as each benchmark shape's test printed it
MEMORY: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The memory estimates in one place; then the time limits: the grader's covers everything a
    problem does (import, compiling, autotuning, public and hidden cases, timing), and a student
    should hear that it is close before the grade."""
    if MEMORY:
        terminalreporter.write_line("GPU memory of one timed call, estimated on meta tensors (the grader measures it):")
        for line in MEMORY:
            terminalreporter.write_line(f"  {line}")
    if not HAS_GPU:  # the interpreter's times say nothing about a GPU's
        return
    spec = load_assignment(hidden=False)
    for problem, spent in sorted(SPENT.items()):
        limit = spec.problem(problem).time_limit_s
        if spent > LIMIT_WARNING_SHARE * limit:
            terminalreporter.write_line(
                f"warning: {problem}'s public cases took {spent:.0f} s here; the grader gives {limit:g} s for all of "
                f"it (import, compiling and autotuning, public and hidden cases, timing): fewer autotune configs, or "
                f"cache_results=True, keep you inside it ({versions.WRITEUP.split(',')[0]}, Grading)",
                yellow=True,
            )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    problem = getattr(metafunc.module, "PROBLEM", None)
    if problem is None:
        return
    if "case" in metafunc.fixturenames:
        params = cases_for(problem, "gpu" if HAS_GPU else "cpu", metafunc.config.getoption("--dtype"))
        metafunc.parametrize("case", params)
    if "memory_case" in metafunc.fixturenames:
        params = cases_for(problem, "memory", metafunc.config.getoption("--dtype"))
        metafunc.parametrize("memory_case", params)
    if "bench_case" in metafunc.fixturenames:
        params = cases_for(problem, "benchmark", metafunc.config.getoption("--dtype"), has_gpu=HAS_GPU)
        metafunc.parametrize("bench_case", params)
        metafunc.parametrize("impl", ["yours", "pytorch"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Benchmarks run only with --benchmark-only (or --benchmark-enable), with the GPU clock."""
    timing_asked = config.getoption("benchmark_only", False) or config.getoption("benchmark_enable", False)
    for item in items:
        if "bench_case" not in getattr(item, "fixturenames", ()):
            continue
        if not timing_asked:
            item.add_marker(pytest.mark.skip(reason="timing runs with: pytest handout --benchmark-only"))
        elif HAS_GPU:
            item.add_marker(pytest.mark.benchmark(timer=gpu_rounds, min_rounds=1, warmup=False))


def gpu_rounds() -> float:
    """pytest-benchmark's timer: the GPU times of rounds already run the grader's way (CUDA events,
    L2 flushed, inputs rotated, queued ahead), handed back round by round."""
    return REPLAY()


@pytest.fixture(scope="session")
def runner(request: pytest.FixtureRequest) -> Iterator[CaseRunner]:
    submission = options.submission_folder(request.config)
    policy = imports.install(submission, versions.graded().allowed_imports)  # for timing, in this process
    runner = CaseRunner(submission, "cuda" if HAS_GPU else "cpu", bool(request.config.getoption("fulltrace", False)))
    try:
        yield runner
    finally:  # no problem's process outlives the session, Ctrl-C included
        runner.close()
        policy.uninstall()


def _as_graded(call: Callable[[], None]) -> None:
    """A refused import fails the test with the grader's message alone, not a traceback through the harness."""
    try:
        return call()
    except imports.RefusedImport as exc:
        refused = str(exc)
    pytest.fail(refused, pytrace=False)  # outside the except block: no "during handling of the above" chain


@pytest.fixture
def check(request: pytest.FixtureRequest, runner: CaseRunner) -> Callable[[Any], None]:
    """check(case): run your kernel on the case's inputs (twice, fresh each time) and compare."""
    problem = request.module.PROBLEM
    return lambda case: _as_graded(lambda: runner.check(problem, case))


@pytest.fixture
def bench(request: pytest.FixtureRequest, runner: CaseRunner, benchmark: Any) -> Callable[[Any, str], None]:
    """bench(case, impl): time your kernel ("yours") or PyTorch's ("pytorch") on a benchmark shape."""
    problem = request.module.PROBLEM
    return lambda case, impl: _as_graded(lambda: BenchmarkRunner(runner, problem).run(benchmark, case, impl))


@pytest.fixture
def memory(request: pytest.FixtureRequest, runner: CaseRunner) -> Callable[[Any], None]:
    """memory(case): your kernel's GPU memory at a benchmark shape, estimated on meta tensors, against its budget."""
    problem = request.module.PROBLEM

    def run(case: Any) -> None:
        result = runner.memory(problem, case)
        if not result.not_implemented:
            request.node.user_properties.append(("gpu_memory", result.summary()))
            MEMORY.append(f"{problem} {result.summary()}")
            print(result.summary())
        memory_verdict(result)

    return lambda case: _as_graded(lambda: run(case))
