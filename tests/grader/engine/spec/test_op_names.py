"""Which recorded ops the kernel rule reads, and which of them its allow-list lets pass
(`grader.engine.spec.op_names`), shared by the worker's recording and the trusted kernel check."""

from __future__ import annotations

from grader.engine.assignment.load import load_assignment
from grader.engine.spec import op_names

ALLOWED = load_assignment().kernel_rule.allowed_ops


def test_only_the_listed_spellings_pass_in_place_and_variants_included() -> None:
    ops = ["aten::empty", "aten::tanh_", "aten::copy_", "aten::_foreach_tanh", "aten::special_expm1", "aten::view"]
    assert op_names.not_allowed(ops, ALLOWED) == ["aten::tanh_", "aten::_foreach_tanh", "aten::special_expm1"]
    assert op_names.not_allowed(["aten::mul", "aten::mul", "aten::empty"], ALLOWED) == ["aten::mul"]


def test_every_pytorch_namespace_but_aten_and_the_profilers_is_recorded_and_never_allowed() -> None:
    spaces = op_names.pytorch_namespaces(
        ["aten::mm", "prepacked::linear_clamp_run", "profiler::_record_function_enter"]
    )
    assert spaces == {"prepacked"}
    assert op_names.recorded("prepacked::linear_clamp_run", spaces)
    assert op_names.recorded("aten::empty", spaces)
    assert not op_names.recorded("profiler::_record_function_enter_new", spaces | {"profiler"})
    assert not op_names.recorded("mylib::my_kernel", spaces)  # a submission's own custom op: its body is recorded
    assert not op_names.recorded("## Call CompiledFxGraph ##", spaces)
    assert op_names.not_allowed(["aten::empty", "prepacked::linear_clamp_run"], ALLOWED) == [
        "prepacked::linear_clamp_run"
    ]
