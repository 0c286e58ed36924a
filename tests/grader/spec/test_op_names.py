"""Which recorded ops stand for PyTorch computing (`grader.spec.op_names`), shared by the worker's
recording and the trusted kernel check."""

from __future__ import annotations

from grader.spec import op_names


def test_an_in_place_op_is_the_op_it_updates_with() -> None:
    assert op_names.forbidden_in(["aten::tanh_", "aten::empty", "aten::__iand__"], ["aten::tanh"]) == ["aten::tanh_"]


def test_every_pytorch_namespace_but_aten_and_the_profilers_is_recorded_and_forbidden() -> None:
    spaces = op_names.pytorch_namespaces(
        ["aten::mm", "prepacked::linear_clamp_run", "profiler::_record_function_enter"]
    )
    assert spaces == {"prepacked"}
    assert op_names.recorded("prepacked::linear_clamp_run", spaces)
    assert op_names.recorded("aten::empty", spaces)
    assert not op_names.recorded("profiler::_record_function_enter_new", spaces | {"profiler"})
    assert not op_names.recorded("mylib::my_kernel", spaces)  # a submission's own custom op
    assert not op_names.recorded("## Call CompiledFxGraph ##", spaces)
    assert op_names.forbidden_in(["aten::empty", "prepacked::linear_clamp_run"], []) == ["prepacked::linear_clamp_run"]


def test_foreach_and_special_spellings_are_the_op_they_compute() -> None:
    ops = ["aten::_foreach_tanh", "aten::_foreach_mul_", "aten::special_expm1", "aten::_foreach_add", "aten::empty"]
    assert op_names.forbidden_in(ops, ["aten::tanh", "aten::mul", "aten::expm1"]) == ops[:3]
