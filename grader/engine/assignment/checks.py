"""Checks of the spec that need PyTorch: allowed ops that exist, case sizes that can run.

Pydantic checks each field's type; these check what the values mean. A typo in allowed_ops
(`aten::veiw`) matches no profiled op and fails every honest call that makes a view; a CPU case of 10^11
elements would run for days in Triton's interpreter (or exhaust memory) before anything says so.
Both are refused at load time, with the problem by name and the limit.
"""

from __future__ import annotations

import difflib
from functools import lru_cache

import torch

from grader.engine.problems import REGISTRY
from grader.engine.problems.base import TORCH_DTYPES
from grader.engine.spec.model import Case, KernelRule, Problem

#: elements a case may move at most (inputs read and outputs written, from its problem's `work`):
#: the CPU suite runs in Triton's interpreter; the GPU limit is far above every benchmark (5.4e8)
MAX_CASE_ELEMENTS = {"cpu": 1 << 22, "gpu": 1 << 32}


@lru_cache(maxsize=1)
def aten_ops() -> frozenset[str]:
    """Every aten operator this PyTorch registers, without overload names (`aten::mul`)."""
    return frozenset(
        name.split(".", 1)[0] for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::")
    )


def unknown_ops(ops: list[str]) -> list[str]:
    """One message per op that does not exist, with the nearest real names."""
    known = aten_ops()
    messages = []
    for op in ops:
        if op in known:
            continue
        near = difflib.get_close_matches(op, known, n=3, cutoff=0.75)
        hint = f" (did you mean {', '.join(near)}?)" if near else " (names look like aten::mm; see torch.ops.aten)"
        messages.append(f"{op!r} is not an aten operator of torch {_torch_version()}{hint}")
    return messages


def _torch_version() -> str:
    return torch.__version__


def case_elements(problem_name: str, case: Case) -> float:
    """Elements a case moves at least once: its problem's bytes of work over the dtype's size."""

    moved, _ = REGISTRY[problem_name].work(case)
    return moved / TORCH_DTYPES[case.dtype].itemsize  # type: ignore[attr-defined]  # every case model has one


def oversized(problem_name: str, case: Case, suite: str) -> str | None:
    limit = MAX_CASE_ELEMENTS[suite]
    elements = case_elements(problem_name, case)
    if elements <= limit:
        return None
    return (
        f"{case.name} moves {elements:.3g} elements, over the {suite} suite's limit of {limit:.3g} "
        f"(MAX_CASE_ELEMENTS in grader/engine/assignment/checks.py)"
    )


def problems_errors(problems: list[Problem], rule: KernelRule) -> list[str]:
    """Every semantic error of the kernel rule and the problems, each located as table.key."""
    errors = [f"kernel_rule.allowed_ops: {m}" for m in unknown_ops(rule.allowed_ops)]
    for problem in problems:
        for case in problem.cases:
            found = oversized(problem.name, case, case.suite)
            if found:
                errors.append(f"problems[{problem.name}].cases[{case.name}]: {found}")
        for case in problem.benchmarks:
            found = oversized(problem.name, case, "gpu")
            if found:
                errors.append(f"problems[{problem.name}].benchmarks[{case.name}]: {found}")
    return errors
