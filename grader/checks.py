"""Checking what a call returned against the float64 definition.

Used by the orchestrator on the worker's data and by the handout tests in-process, so a student
sees the same verdict and message locally as in the grade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grader.problems.base import ProblemKind, describe_tensor
from grader.spec import Case, Problem

SHOW_MISMATCHES = 5


@dataclass
class Verdict:
    passed: bool
    message: str = ""


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def compare(name: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str | None:
    """None when `actual` matches `expected` (float64); else a message with errors and indices."""
    act = actual.detach().to("cpu", torch.float64)
    exp = expected.detach().to("cpu", torch.float64)
    act_nan, exp_nan = torch.isnan(act), torch.isnan(exp)
    act_inf, exp_inf = torch.isinf(act), torch.isinf(exp)
    finite = ~(exp_nan | exp_inf) & ~(act_nan | act_inf)
    diff = torch.zeros_like(exp)
    diff[finite] = (act[finite] - exp[finite]).abs()
    bad = (act_nan != exp_nan) | (act_inf != exp_inf) | (exp_inf & act_inf & (torch.sign(act) != torch.sign(exp)))
    bad |= finite & (diff > atol + rtol * exp.abs())
    if not bool(bad.any()):
        return None
    rel = diff / exp.abs().clamp_min(1e-12)
    lines = [
        f"{name}: {int(bad.sum())} of {exp.numel()} elements differ "
        f"(max abs error {_fmt(float(diff.max()))}, max rel error {_fmt(float(rel[finite].max()) if finite.any() else 0.0)}, "
        f"tolerance atol={atol:g} rtol={rtol:g})"
    ]
    unexpected_nan = int((act_nan & ~exp_nan).sum())
    if unexpected_nan:
        lines.append(f"  {unexpected_nan} NaN where a number was expected (unwritten output elements read as NaN)")
    for idx in torch.nonzero(bad)[:SHOW_MISMATCHES].tolist():
        lines.append(f"  at {tuple(idx)}: expected {_fmt(float(exp[tuple(idx)]))}, got {_fmt(float(act[tuple(idx)]))}")
    return "\n".join(lines)


def check_call(
    kind: ProblemKind,
    problem: Problem,
    case: Case,
    device: str,
    expected: dict[str, torch.Tensor],
    outputs: dict[str, Any],
    meta: dict[str, Any],
    inputs_changed: list[str],
) -> Verdict:
    """Every rule of the output contract, in the order a student should fix them."""
    problems: list[str] = []
    notes: dict[str, str] = meta.get("_notes", {}) or {}
    if inputs_changed:
        problems.append(f"the call modified its input(s) {', '.join(inputs_changed)}; inputs must be left unchanged")
    for name in kind.output_names:
        if name in notes:
            problems.append(f"{name}: {notes[name]}")
            continue
        info = meta.get(name) or {}
        value = outputs.get(name)
        if value is None and not info:
            problems.append(f"{name}: missing")
            continue
        if not info.get("exact", False) or value is None:
            problems.append(f"{name}: returned {info.get('type', type(value).__name__)}, expected exactly torch.Tensor")
            continue
        if info.get("aliases"):
            problems.append(f"{name}: shares memory with the input(s) {', '.join(info['aliases'])}; return a new tensor")
            continue
        if info.get("device") != device:
            problems.append(f"{name}: on device {info.get('device')}, expected {device}")
            continue
        want_shape = list(expected[name].shape)
        if info.get("shape") != want_shape:
            problems.append(f"{name}: shape {tuple(info.get('shape', []))}, expected {tuple(want_shape)}")
            continue
        want_dtype = kind.expected_dtype(name, case)
        if info.get("dtype") != str(want_dtype).removeprefix("torch."):
            problems.append(f"{name}: dtype {info.get('dtype')}, expected {str(want_dtype).removeprefix('torch.')}")
            continue
        tol = problem.tolerance_for(name, getattr(case, "dtype"))
        message = compare(name, value, expected[name], tol.atol, tol.rtol)
        if message:
            problems.append(message)
    return Verdict(not problems, "\n".join(problems))


def case_label(kind: ProblemKind, case: Case, inputs: dict[str, Any] | None = None) -> str:
    text = f"{case.name} [{kind.describe(case)}]"
    if inputs:
        tensors = [f"{k}: {describe_tensor(v)}" for k, v in inputs.items() if isinstance(v, torch.Tensor)]
        text += " (" + "; ".join(tensors) + ")"
    return text
