"""Public tests for problem 3 (tiled matmul): your kernel against the float64 definition.

Each case calls your function twice with fresh random inputs of the case's shape, dtype and
layout, and checks the output's type, shape, dtype and device, that every element was written,
that NaN/inf land where they should, and that the values are within the spec's tolerance.
"""

PROBLEM = "matmul"


def test_matches_definition(case, check):
    check(case)


def test_memory_budget(memory_case, memory):
    """Your kernel's GPU memory at each benchmark shape, against the shape's budget: run on meta
    tensors (shapes, no data, no kernel launched), so it takes milliseconds on any machine."""
    memory(memory_case)


def test_speed(bench_case, impl, bench):
    """Timed only with `pytest handout --benchmark-only` on a GPU: your kernel, then PyTorch's."""
    bench(bench_case, impl)
