"""The assignment spec: the real file loads; malformed files fail naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.problems import REGISTRY
from grader.engine.spec.model import DEFAULT_SPEC, SpecError

MINIMAL = """
[assignment]
name = "t"
version = "1"
title = "t"

[environment]
python = ">=3.11"
torch = "2.11.0"
triton = "3.6.0"
numpy = "<2.4"
allowed_imports = ["torch", "triton", "numpy"]

[kernel_rule]
rule = "allocate, view, copy, launch"
allowed_ops = ["aten::empty", "aten::view"]

[[problems]]
name = "gelu"
title = "GeLU"
module = "gelu"
function = "triton_gelu"
writeup_section = "x"
points = { correctness = 10, performance = 5 }
time_limit_s = 10
[problems.tolerance.default]
float32 = { atol = 1e-5, rtol = 1e-5 }
float16 = { atol = 1e-3, rtol = 1e-3 }
bfloat16 = { atol = 1e-2, rtol = 1e-2 }
[[problems.cases]]
name = "a"
shape = [4, 4]
dtype = "float32"
"""


def write(tmp_path: Path, text: str, hidden: str | None = None) -> Path:
    path = tmp_path / "assignment.toml"
    path.write_text(text)
    if hidden is not None:
        (tmp_path / "hidden_cases.toml").write_text(hidden)
    return path


def test_real_spec_loads_every_problem_with_its_kind_and_every_suite() -> None:
    spec = load_assignment(DEFAULT_SPEC)
    assert spec.problems
    for problem in spec.problems:
        assert REGISTRY[problem.name].name == problem.name
        for suite in ("gpu", "cpu"):
            assert problem.suite_cases(suite, "public"), (problem.name, suite)
            assert problem.suite_cases(suite, "hidden"), (problem.name, suite)
        assert problem.benchmarks


def test_public_only_leaves_hidden_cases_out() -> None:
    spec = load_assignment(DEFAULT_SPEC, hidden=False)
    assert not spec.has_hidden_cases


def test_cpu_cases_avoid_bf16_for_dot_problems() -> None:
    """Triton's interpreter multiplies bf16 bit patterns in tl.dot: CPU cases must not use bf16 there."""
    spec = load_assignment(DEFAULT_SPEC)
    for name in ("matmul", "flash_attention"):
        assert all(c.dtype != "bfloat16" for c in spec.problem(name).suite_cases("cpu"))


def test_minimal_spec_and_hidden_merge(tmp_path: Path) -> None:
    spec = load_assignment(write(tmp_path, MINIMAL, '[[hidden.gelu]]\nname = "h"\nshape = [3]\ndtype = "float16"\n'))
    cases = spec.problem("gelu").cases
    assert [(c.name, c.visibility) for c in cases] == [("a", "public"), ("h", "hidden")]


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (lambda t: t.replace("time_limit_s = 10", 'time_limit_s = "soon"'), ["time_limit_s", "soon"]),
        (
            lambda t: t.replace("points = { correctness = 10, performance = 5 }", "points = { correctness = 10 }"),
            ["points.performance", "Field required"],
        ),
        (lambda t: t.replace('dtype = "float32"\n', 'dtype = "float64"\n'), ["cases[a].dtype", "float64"]),
        (lambda t: t.replace("shape = [4, 4]", "shape = [4, 4]\nshapes = 1"), ["cases[a].shapes", "Extra inputs"]),
        (lambda t: t.replace('name = "gelu"', 'name = "relu"'), ["relu", "not a known problem"]),
        (lambda t: t.replace("float16 = { atol = 1e-3, rtol = 1e-3 }\n", ""), ["tolerance", "float16"]),
        (lambda t: t.replace("[[problems.cases]]", "[[problems.cases]]\n[[problems.cases]]"), ["problems[gelu].cases"]),
        (
            lambda t: t + '[[problems.cases]]\nname = "a"\nshape = [2]\ndtype = "float32"\n',
            ["repeats case names", "'a'"],
        ),
        (lambda t: t.replace("[assignment]", "[assignment\n"), ["not valid TOML"]),
        (lambda t: t.replace("time_limit_s = 10", "time_limit_s = inf"), ["time_limit_s", "finite"]),
        (lambda t: t.replace("time_limit_s = 10", "time_limit_s = nan"), ["time_limit_s", "finite"]),
        (lambda t: t.replace('name = "a"', 'name = "a"\ncompile_only = true'), ["compile_only", "CPU cases"]),
    ],
)
def test_malformed_spec_names_file_and_key(tmp_path: Path, edit, fragments: list[str]) -> None:
    path = write(tmp_path, edit(MINIMAL))
    with pytest.raises(SpecError) as info:
        load_assignment(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_hidden_file_naming_unknown_problem_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL, '[[hidden.softmax]]\nname = "h"\nshape = [3, 3]\ndtype = "float16"\n')
    with pytest.raises(SpecError, match="hidden.softmax names no problem"):
        load_assignment(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_assignment(tmp_path / "nope.toml")


def test_a_spec_that_is_not_utf8_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "assignment.toml"
    path.write_bytes(MINIMAL.replace("gelu", "g\xe9lu", 1).encode("latin-1"))
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_assignment(path)
    path.write_bytes(MINIMAL.encode("utf-8"))  # the honest twin
    assert load_assignment(path).problems
