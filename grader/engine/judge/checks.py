"""Checking what a call returned against the float64 definition.

Used by the orchestrator on the worker's data and by the handout tests in-process, so a student
sees the same verdict and message locally as in the grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grader.engine import protocol
from grader.engine.judge.op_sites import op_call_sites
from grader.engine.problems.base import ProblemKind, describe_tensor
from grader.engine.spec import op_names
from grader.engine.spec.gpu_limits import GPU_SHARED_BYTES
from grader.engine.spec.gpu_limits import hint as compile_hint
from grader.engine.spec.model import Case, Problem

SHOW_MISMATCHES = 5
#: memory the grader leaves unwritten holds PyTorch's fill NaN (0x7fc00000 in float32, 0x7e00 in float16,
#: 0x7fc0 in bfloat16), which float64 holds as this; a NaN a kernel computes has another sign or
#: payload (0xffc00000 from x86 arithmetic, 0x7fffffff from a GPU's), so the two can be told apart
UNWRITTEN_NAN_BITS = 0x7FF8000000000000


@dataclass
class Verdict:
    passed: bool
    message: str = ""


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def compare(name: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str | None:
    """None when `actual` matches `expected` (float64); else a message with errors and indices.

    Compared on `expected`'s device: the timed rounds' samples are checked on the GPU, where their
    float64 definitions were computed (a CPU comparison cost more than the rest of the check).
    """
    exp = expected.detach().to(torch.float64)
    act = actual.detach().to(exp.device, torch.float64)
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
        f"(max abs error {_fmt(float(diff.max()))}, max rel error "
        f"{_fmt(float(rel[finite].max()) if finite.any() else 0.0)}, "
        f"tolerance atol={atol:g} rtol={rtol:g})"
    ]
    unexpected = act_nan & ~exp_nan
    unwritten = int((unexpected & (act.view(torch.int64) == UNWRITTEN_NAN_BITS)).sum())
    computed = int(unexpected.sum()) - unwritten
    if unwritten:
        lines.append(f"  {unwritten} NaN where a number was expected (unwritten output elements read as NaN)")
    if computed:
        lines.append(f"  {computed} NaN where a number was expected, computed by the kernel (not left unwritten)")
    for idx in torch.nonzero(bad)[:SHOW_MISMATCHES].tolist():
        lines.append(f"  at {tuple(idx)}: expected {_fmt(float(exp[tuple(idx)]))}, got {_fmt(float(act[tuple(idx)]))}")
    return "\n".join(lines)


def _names(value: Any) -> str:
    items = value if isinstance(value, list) else [value]
    return ", ".join(str(x)[:60] for x in items[:10])


def payload_issue(name: str, value: Any, want_shape: list[int], want_dtype: torch.dtype) -> str | None:
    """Whether the payload itself (not the worker's description of it) is what may be compared.

    The payload comes from an untrusted process through `torch.load(weights_only=True)`: it may
    be any tensor the loader can build, e.g. a view of one element expanded to a huge shape that
    would exhaust memory when converted, or a sparse tensor. Checked before any arithmetic.
    """
    if type(value) is not torch.Tensor:
        return f"{name}: the worker sent {type(value).__name__} instead of the output's values"
    if value.layout != torch.strided or value.is_quantized or value.is_nested:
        return f"{name}: the worker sent a {value.layout} tensor instead of a dense one"
    if list(value.shape) != want_shape or value.dtype != want_dtype or value.device.type != "cpu":
        return (
            f"{name}: the worker sent values of shape {tuple(value.shape)} {value.dtype} that do not match "
            f"its own description"
        )
    if (
        not value.is_contiguous()
        or value.untyped_storage().nbytes() < (value.storage_offset() + value.numel()) * value.element_size()
    ):
        return f"{name}: the worker sent a tensor whose memory does not hold its elements"
    return None


def output_contract(
    kind: ProblemKind, case: Case, device: str, name: str, want_shape: list[int], info: Any, value: Any = None
) -> str | None:
    """The first rule of the output contract that `name`'s facts (`output_facts`, from the worker:
    untrusted data) break, or None; for correctness calls and sampled timed rounds alike."""
    if not info and value is None:
        return f"{name}: missing"
    if not isinstance(info, dict):
        return f"{name}: the worker's description of it is malformed"
    if not info.get("exact", False):
        return f"{name}: returned {str(info.get('type', type(value).__name__))[:200]}, expected exactly torch.Tensor"
    if info.get("layout", "strided") != "strided":
        return f"{name}: a {str(info.get('layout'))[:40]} tensor, expected a dense (strided) torch.Tensor"
    if info.get("aliases"):
        return f"{name}: shares memory with the input(s) {_names(info['aliases'])}; return a new tensor"
    if info.get("device") != device:
        return f"{name}: on device {str(info.get('device'))[:40]}, expected {device}"
    if info.get("shape") != want_shape:
        shape = info.get("shape")
        shown = tuple(shape) if isinstance(shape, list) else shape
        return f"{name}: shape {str(shown)[:100]}, expected {tuple(want_shape)}"
    want = str(kind.expected_dtype(name, case)).removeprefix("torch.")
    if info.get("dtype") != want:
        return f"{name}: dtype {str(info.get('dtype'))[:40]}, expected {want}"
    return None


def _check_output(
    kind: ProblemKind,
    problem: Problem,
    case: Case,
    device: str,
    name: str,
    expected: torch.Tensor,
    value: Any,
    info: Any,
) -> str | None:
    """The first rule of the output contract that `name` breaks, or None."""
    want_shape, want_dtype = list(expected.shape), kind.expected_dtype(name, case)
    broken = output_contract(kind, case, device, name, want_shape, info, value)
    if broken:
        return broken
    if value is None:
        return f"{name}: the worker sent no values for it"
    bad = payload_issue(name, value, want_shape, want_dtype)
    if bad:
        return bad
    tol = problem.tolerance_for(name, case.dtype)  # type: ignore[attr-defined]  # every case model has one
    return compare(name, value, expected, tol.atol, tol.rtol)


def check_call(
    kind: ProblemKind,
    problem: Problem,
    case: Case,
    device: str,
    expected: dict[str, torch.Tensor],
    outputs: dict[str, Any],
    meta: dict[str, Any],
    inputs_changed: list[str],
    gpu_compiles: Sequence[protocol.GpuCompile] = (),
) -> Verdict:
    """Every rule of the output contract, in the order a student should fix them; first of all,
    that the graded GPU's compiler takes the kernels the call launched (under the interpreter).

    `outputs`, `meta` and `inputs_changed` come from the worker, an untrusted process: whatever
    their shape, the answer is a verdict, never an exception.
    """
    problems: list[str] = []
    refused = gpu_compile_check(gpu_compiles)
    if refused:
        problems.append(refused)
    if case.compile_only and device == "cpu":  # nothing ran: the compiler's verdict is the case's
        return Verdict(not problems, "\n".join(problems))
    outputs = outputs if isinstance(outputs, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    notes = meta.get("_notes")
    notes = notes if isinstance(notes, dict) else {}
    if inputs_changed:
        problems.append(f"the call modified its input(s) {_names(inputs_changed)}; inputs must be left unchanged")
    for name in kind.output_names:
        if name in notes:
            problems.append(f"{name}: {str(notes[name])[:1000]}")
            continue
        message = _check_output(kind, problem, case, device, name, expected[name], outputs.get(name), meta.get(name))
        if message:
            problems.append(message)
    return Verdict(not problems, "\n".join(problems))


def gpu_compile_check(compiles: Sequence[protocol.GpuCompile]) -> str | None:
    """The GPU's verdict on the kernels a CPU call launched (`grader.engine.harness.gpu_compile`), or None.

    Under the interpreter a kernel runs as Python; the graded GPU compiles it first. A kernel its
    compiler refuses, or that asks for more shared memory than an H200 has, scores nothing there,
    so it fails here too, with the compiler's own message.
    """
    for result in compiles:
        if result.error is not None:
            hint = compile_hint(result.error) or "the graded GPU compiles every kernel this way before it runs"
            return (
                f"the GPU compiler refuses kernel {result.kernel} (compiled ahead of time for the graded H200 with "
                f"this call's arguments; Triton's interpreter runs it on a CPU, a GPU does not):\n"
                f"{result.error}\nhint: {hint}"
            )
        if result.shared_bytes is not None and result.shared_bytes > GPU_SHARED_BYTES:
            return (
                f"kernel {result.kernel} needs {result.shared_bytes} bytes of shared memory per program, and the "
                f"graded H200 has {GPU_SHARED_BYTES} (227 KiB): it would not launch there\nhint: smaller tiles "
                f"(BLOCK sizes) or fewer pipeline stages (num_stages) need less"
            )
    return None


def profiled_kernel_check(
    problem: Problem, case: Case, profile: protocol.Profile | None, triton_launches: int, submission: Path
) -> str | None:
    """`kernel_check` on what a correctness call's profile recorded (nothing recorded: no ops)."""
    return kernel_check(
        problem,
        case,
        list(profile.aten_ops) if profile else [],
        triton_launches,
        list(profile.compiled_regions) if profile else [],
        submission,
        profile.graph_launches if profile else 0,
        profile.unwritten if profile else None,
    )


def device_note(case: Case, foreign_work: Sequence[str]) -> str | None:
    """GPU work of a watched call launched outside every Triton launch and PyTorch op
    (`grader.engine.harness.device_activity`), as a note for staff, never a verdict: its first run
    on an H100 (2026-12-08) named PyTorch's own copies and fills in honest matmul and GeLU
    forwards, so it decides no grade until it runs clean on both corpora on a GPU
    (docs/performance.md, "Not yet run on the GPU")."""
    if not foreign_work:
        return None
    return (
        f"case {case.name}: the GPU ran {', '.join(foreign_work)} launched neither inside one of the "
        f"submission's Triton launches nor inside a PyTorch op (the device-activity check; evidence "
        f"for a person, not a verdict)"
    )


def kernel_check(
    problem: Problem,
    case: Case,
    aten_ops: list[str],
    triton_launches: int,
    compiled: Sequence[str] = (),
    submission: Path | None = None,
    graph_launches: int = 0,
    unwritten: protocol.Unwritten | None = None,
) -> str | None:
    """The kernel rule, one wording for correctness, timed calls and `pytest handout`.

    `aten_ops` are the ops recorded in the watched part of the call (`ProblemKind.call`'s
    `watch`: the whole call, or only the forward, for a problem whose backward may be PyTorch);
    `triton_launches` counts the Triton kernels the whole call launched; `compiled` names the
    events of torch.compile'd code that ran compiled in the watched part, where the watch runs
    it eagerly, and of TorchScript's fusers: their kernels are Inductor's or PyTorch's, not the
    student's, and their ops are unseen (code PyTorch generates and runs past both, Inductor's,
    AOTInductor's, jiterator's, NNC's, writes memory the writer check refuses).
    `submission`, where known, is read for the lines that likely run an op the rule does not allow.
    `graph_launches` counts CUDA graph replays in the watched part: the kernels a graph runs were
    captured before the call, so neither the ops nor the launches seen stand for them.
    `unwritten` is the writer check's finding (`grader.engine.harness.writers`): the tensor returned is
    not what the call's kernels stored, or a tensor changed with no op or launch writing it.
    GPU work launched outside every Triton launch and PyTorch op decides nothing here: it is a note
    for staff (`device_note`) until the device-activity check has run clean on a GPU.
    """
    used = op_names.not_allowed(aten_ops, problem.rule.allowed_ops)
    if used:
        sites = op_call_sites(submission, used) if submission is not None else []
        where = f" (likely at {', '.join(sites)})" if sites else ""
        return (
            f"called the PyTorch op(s) {', '.join(used)} in case {case.name}{where}, which the kernel rule does "
            f"not allow: {problem.rule.rule}"
        )
    if compiled:
        return (
            f"ran compiled PyTorch code in case {case.name} ({compiled[0]}): torch.compile'd code runs "
            f"eagerly there unless torch.compiler's stance was changed; TorchScript's fused groups are not "
            f"allowed either: {problem.rule.rule}"
        )
    if graph_launches:
        return (
            f"replayed a CUDA graph in case {case.name}: what a graph runs was captured before the call, so "
            f"the grader cannot tell whose kernels computed {problem.title}; launch your Triton kernels "
            f"directly (CUDA graphs are not allowed in a graded call)"
        )
    if not triton_launches:
        return f"no Triton kernel was launched in case {case.name}: {problem.title} must be computed by a Triton kernel"
    if unwritten is not None:
        if unwritten.what == "changed_outside":
            return (
                f"in case {case.name}, {unwritten.detail}: only your Triton kernels and the PyTorch ops the kernel "
                f"rule allows may write tensors (NumPy or ctypes writing through a tensor's address is neither): "
                f"{problem.rule.rule}"
            )
        if unwritten.what == "from_outside":
            return (
                f"returned a tensor in case {case.name} that was {unwritten.detail}: what your kernels read must "
                f"be made by PyTorch (the inputs, torch.empty, copies) or before the call (constants at import): "
                f"{problem.rule.rule}"
            )
        return (
            f"returned a tensor in case {case.name} that none of your Triton kernels wrote in that call "
            f"({unwritten.detail}): what your forward returns must be what your kernels stored, copied or cast at "
            f"most: {problem.rule.rule}"
        )
    return None


def case_label(kind: ProblemKind, case: Case, inputs: dict[str, Any] | None = None) -> str:
    text = f"{case.name} [{kind.describe(case)}]"
    if inputs:
        tensors = [f"{k}: {describe_tensor(v)}" for k, v in inputs.items() if isinstance(v, torch.Tensor)]
        text += " (" + "; ".join(tensors) + ")"
    return text
