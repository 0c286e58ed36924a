"""pytest plugin for the public handout tests: which submission, which device, which cases.

`pytest handout` tests student_template/; `pytest handout --submission PATH` tests another folder.
Without a CUDA GPU the kernels run through Triton's interpreter on the small CPU cases: this file
sets TRITON_INTERPRET=1 before Triton is imported, so there is nothing for you to set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from grader.handout_support import REPLAY, BenchmarkRunner, CaseRunner, cases_for  # noqa: E402  (after TRITON_INTERPRET)

DEFAULT_SUBMISSION = Path(__file__).resolve().parent.parent / "student_template"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("handout", "Triton kernels assignment")
    group.addoption("--submission", default=str(DEFAULT_SUBMISSION), help="folder with gelu.py, softmax.py, matmul.py, flash_attention.py (default: student_template)")
    group.addoption("--dtype", default=None, choices=["float32", "float16", "bfloat16"], help="only cases of this dtype")


def pytest_report_header(config: pytest.Config) -> list[str]:
    device = torch.cuda.get_device_name() if HAS_GPU else "CPU, through Triton's interpreter (TRITON_INTERPRET=1; small cases)"
    return [f"submission: {config.getoption('--submission')}", f"device: {device}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    problem = getattr(metafunc.module, "PROBLEM", None)
    if problem is None:
        return
    if "case" in metafunc.fixturenames:
        params = cases_for(problem, "gpu" if HAS_GPU else "cpu", metafunc.config.getoption("--dtype"))
        metafunc.parametrize("case", params)
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
def runner(request: pytest.FixtureRequest) -> CaseRunner:
    return CaseRunner(Path(request.config.getoption("--submission")), "cuda" if HAS_GPU else "cpu")


@pytest.fixture
def check(request: pytest.FixtureRequest, runner: CaseRunner) -> Callable[[Any], None]:
    """check(case): run your kernel on the case's inputs (twice, fresh each time) and compare."""
    problem = request.module.PROBLEM
    return lambda case: runner.check(problem, case)


@pytest.fixture
def bench(request: pytest.FixtureRequest, runner: CaseRunner, benchmark: Any) -> Callable[[Any, str], None]:
    """bench(case, impl): time your kernel ("yours") or PyTorch's ("pytorch") on a benchmark shape."""
    problem = request.module.PROBLEM
    return lambda case, impl: BenchmarkRunner(runner, problem).run(benchmark, case, impl)
