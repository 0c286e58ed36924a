"""The output comparison: tolerances, NaN/inf placement, and what a failure message names."""

from __future__ import annotations

import inspect

import torch

from grader.engine.assignment.load import load_assignment
from grader.engine.judge.checks import compare, kernel_check
from grader.engine.problems import REGISTRY


def test_within_tolerance_passes() -> None:
    exp = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert compare("out", exp.float() + 1e-6, exp, atol=1e-5, rtol=0) is None


def test_message_names_errors_and_indices() -> None:
    exp = torch.zeros(4, 4, dtype=torch.float64)
    act = exp.clone().float()
    act[2, 3] = 0.5
    message = compare("out", act, exp, atol=1e-3, rtol=1e-3)
    assert message is not None
    assert "1 of 16 elements differ" in message and "max abs error 0.5" in message and "(2, 3)" in message


def test_nan_must_match_positions() -> None:
    exp = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert compare("out", torch.tensor([float("nan"), 1.0]), exp, 0, 0) is None
    assert compare("out", torch.tensor([0.0, 1.0]), exp, 1, 1) is not None
    message = compare("out", torch.tensor([float("nan"), float("nan")]), exp, 1, 1)
    assert message is not None and "NaN where a number was expected" in message


def test_inf_sign_must_match() -> None:
    exp = torch.tensor([float("inf")], dtype=torch.float64)
    assert compare("out", torch.tensor([float("inf")]), exp, 0, 0) is None
    assert compare("out", torch.tensor([float("-inf")]), exp, 0, 0) is not None
    assert compare("out", torch.tensor([1e30]), exp, 0, 0) is not None


def test_kernel_check_fails_compiled_code_in_the_watched_part() -> None:
    problem = next(p for p in load_assignment(hidden=False).problems if p.name == "gelu")
    case = REGISTRY["gelu"].case_model.model_validate({"name": "c", "suite": "cpu", "shape": [4], "dtype": "float32"})
    assert kernel_check(problem, case, ["aten::empty"], 1) is None
    assert kernel_check(problem, case, ["aten::empty"], 1, []) is None
    message = kernel_check(problem, case, ["aten::empty"], 1, ["Torch-Compiled Region: 0/0"])
    assert message and "torch.compile'd code" in message and "Torch-Compiled Region: 0/0" in message
    assert "aten::gelu" in (kernel_check(problem, case, ["aten::gelu"], 1, ["Torch-Compiled Region: 0/0"]) or "")


def test_gpu_work_launched_outside_every_launch_and_op_is_a_note_for_staff_not_a_verdict() -> None:
    """The device-activity check named PyTorch's own copies and fills in honest forwards on its
    first H100 run: until it runs clean there, what it names costs nothing and a person looks."""
    from grader.engine.judge.checks import device_note
    from grader.engine.records import flags
    from grader.engine.records.model import ProblemResult

    problem = load_assignment(hidden=False).problem("gelu")
    case = problem.cases[0]
    assert "foreign_work" not in inspect.signature(kernel_check).parameters  # it cannot decide a verdict
    assert device_note(case, []) is None
    note = device_note(case, ["Memcpy DtoD (Device -> Device)"])
    assert note is not None and case.name in note and "Memcpy DtoD" in note and "not a verdict" in note
    gelu = ProblemResult(name="gelu", score=15, max_score=15, status="passed", device_review=note)
    (flag,) = flags.problem_flags(gelu)
    assert (flag.kind, flag.blocking) == ("review", False) and "Memcpy DtoD" in flag.detail
