"""One call of a submission, as the worker and the handout both make it (`grader.engine.harness.calls`): what the
profiler records, how outputs and inputs are described, where fresh inputs go, and what `run`
leaves behind."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from grader.engine.harness import calls, watch
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import CallOutput

GELU = REGISTRY["gelu"]
CASE = GELU.case_model.model_validate({"name": "t", "suite": "cpu", "shape": [8, 16], "dtype": "float32"})


# -- op recording ------------------------------------------------------------------------------------


def test_profiled_records_ops_run_on_other_threads() -> None:
    record: dict[str, Any] = {}
    x = torch.randn(16)
    with calls.profiled(record, "cpu"):
        thread = threading.Thread(target=lambda: torch.nn.functional.gelu(x))
        thread.start()
        thread.join()
    assert "aten::gelu" in record["aten_ops"] and record["triton_launches"] == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="Triton's interpreter runs the launch on a CPU")
def test_the_interpreters_own_ops_inside_a_launch_are_not_judged_but_a_grid_functions_are() -> None:
    """The interpreter runs `set_` (off the allow-list) inside every launch: not the submission's.
    A grid function is the submission's code running inside the launch: its op is judged."""
    from tests.grader.engine.harness.kernel_support import double

    watch.arm()
    x = torch.randn(64)
    y = torch.empty_like(x)
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        double[(1,)](x, y, 64, B=64)
    assert "aten::set_" not in record["aten_ops"] and record["triton_launches"] == 1
    assert torch.equal(y, 2 * x)

    def grid(meta: dict[str, Any]) -> tuple[int]:
        y.copy_(torch.tanh(x))  # computed in PyTorch inside the launch
        return (1,)

    record = {}
    with calls.profiled(record, "cpu"):
        double[grid](x, y, 64, B=64)
    assert "aten::tanh" in record["aten_ops"] and "aten::set_" not in record["aten_ops"]


def test_profiled_notices_a_profiler_switched_off(clean_guard: watch.Guard) -> None:
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        torch.autograd._disable_profiler()
        torch.nn.functional.gelu(torch.randn(4))
    assert "aten::gelu" not in record["aten_ops"]
    assert clean_guard.tampered == ["the profiler (switched off during the call)"]


def test_profiled_notices_a_profiler_restarted(clean_guard: watch.Guard) -> None:
    from torch.autograd import ProfilerActivity, _enable_profiler, _prepare_profiler

    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        torch.autograd._disable_profiler()
        torch.nn.functional.gelu(torch.randn(4))
        _prepare_profiler(watch.PROFILER.config, {ProfilerActivity.CPU})
        _enable_profiler(watch.PROFILER.config, {ProfilerActivity.CPU})
    assert clean_guard.tampered == ["the profiler (restarted during the call)"]


def _compiled_gelu() -> Any:
    """A torch.compile'd GeLU, compiled once outside any watch (as a submission's import would)."""
    import torch._dynamo.eval_frame as eval_frame

    fn = torch.compile(lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    prior = eval_frame._set_stance(eval_frame.DynamoStance("default"))
    try:
        fn(torch.randn(8))
    finally:
        eval_frame._set_stance(prior)
    return fn


def test_profiled_runs_compiled_code_eagerly_so_its_ops_are_seen() -> None:
    """Inductor's generated code records no aten op: in the watch it runs as the eager code it was."""
    import torch._dynamo.eval_frame as eval_frame

    fn = _compiled_gelu()
    x = torch.randn(8)
    unwatched = torch.profiler.profile()
    with unwatched:
        fn(x)
    assert not any(e.name.startswith("aten::gelu") for e in unwatched.events())  # the hole, without the watch
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        fn(x)
    assert "aten::gelu" in record["aten_ops"] and record["compiled_regions"] == []
    assert eval_frame._stance.stance == "default"  # the stance is the submission's again afterwards


def test_profiled_names_compiled_code_that_ran_compiled() -> None:
    """A call that switches torch.compile back on inside the watch leaves compiled code's events."""
    fn = _compiled_gelu()
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        torch.compiler.set_stance("default")
        fn(torch.randn(8))
    assert "aten::gelu" not in record["aten_ops"]
    assert any(name.startswith("Torch-Compiled Region") for name in record["compiled_regions"])


# -- describing outputs and inputs -------------------------------------------------------------------


class Booby(torch.Tensor):
    """A subclass whose every torch call raises: describing it must not make any."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise RuntimeError("subclass code ran in the harness")


def test_describe_outputs_never_runs_a_subclass_or_reads_an_odd_tensor() -> None:
    x = torch.randn(4, 4)
    outputs = {
        "subclass": torch.randn(4, 4).as_subclass(Booby),
        "sparse": torch.eye(4).to_sparse(),
        "meta": torch.empty(4, 4, device="meta"),
        "alias": x.t(),
        "integer": torch.zeros(4, 4, dtype=torch.int32),
        "good": torch.randn(4, 4).t(),
        "lazy": (lambda: x),
    }
    meta, payload = calls.describe_outputs(CallOutput(outputs), {"x": x})
    assert meta["subclass"] == {"type": f"{__name__}.Booby", "exact": False} and payload["subclass"] is None
    assert meta["sparse"]["layout"] == "sparse_coo" and payload["sparse"] is None
    assert meta["meta"]["device"] == "meta" and payload["meta"] is None
    assert meta["alias"]["aliases"] == ["x"]
    assert meta["integer"]["dtype"] == "int32" and payload["integer"] is None
    assert payload["good"].is_contiguous() and torch.equal(payload["good"], outputs["good"])
    assert meta["lazy"]["exact"] is False and payload["lazy"] is None


def test_changed_inputs_sees_writes_between_the_elements_of_a_view() -> None:
    big = torch.randn(6, 10)
    inputs = {"x": big[:, ::2], "flag": True}
    before = calls.input_bits(inputs)
    assert calls.changed_inputs(inputs, before) == []
    big[:, 1] = 7.0  # outside the view
    assert calls.changed_inputs(inputs, before) == ["x"]


def test_changed_inputs_sees_a_storage_swapped_or_shrunk() -> None:
    inputs = {"x": torch.randn(8)}
    before = calls.input_bits(inputs)
    inputs["x"].untyped_storage().resize_(0)
    assert calls.changed_inputs(inputs, before) == ["x"]


def test_fresh_inputs_put_repeats_in_the_same_tensors() -> None:
    fresh = calls.FreshInputs()
    first = fresh.place("case", GELU.make_inputs(CASE, torch.Generator().manual_seed(1)))
    values = first["x"].clone()
    second = fresh.place("case", GELU.make_inputs(CASE, torch.Generator().manual_seed(2)))
    assert second["x"] is first["x"] and second["x"].data_ptr() == first["x"].data_ptr()
    assert not torch.equal(second["x"], values), "same tensor, new values"
    other = CASE.model_copy(update={"name": "other"})
    third = fresh.place("other", GELU.make_inputs(other, torch.Generator().manual_seed(3)))
    assert third["x"] is not first["x"]


# -- one call, as the worker and the handout both make it --------------------------------------------


def _inputs(seed: int) -> dict[str, Any]:
    return GELU.make_inputs(CASE, torch.Generator().manual_seed(seed))


def test_run_fills_new_memory_with_nan_during_the_call_only() -> None:
    seen: dict[str, Any] = {}

    def peek(x: torch.Tensor) -> torch.Tensor:
        seen["fill"] = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
        seen["empty"] = torch.empty(64)
        return x.clone()

    outcome = calls.run(GELU, peek, CASE, _inputs(1), "cpu", calls.FreshInputs(), watch=False)
    assert outcome.error is None and seen["fill"] is True and torch.isnan(seen["empty"]).all()
    assert torch.utils.deterministic.fill_uninitialized_memory is False  # type: ignore[attr-defined]
    assert not torch.are_deterministic_algorithms_enabled()


def test_run_keeps_the_submissions_error_and_still_resets_the_fill() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("block size too large")

    outcome = calls.run(GELU, broken, CASE, _inputs(1), "cpu", calls.FreshInputs(), watch=True)
    assert isinstance(outcome.error, ValueError) and outcome.result is None
    assert torch.utils.deterministic.fill_uninitialized_memory is False  # type: ignore[attr-defined]


def test_run_gives_a_repeat_the_first_calls_tensors_with_new_values() -> None:
    """An output cache keyed by the input tensor answers the repeat with the first call's output."""
    cache: dict[int, torch.Tensor] = {}

    def cached(x: torch.Tensor) -> torch.Tensor:
        return cache.setdefault(id(x), torch.nn.functional.gelu(x, approximate="tanh"))

    fresh = calls.FreshInputs()
    first = calls.run(GELU, cached, CASE, _inputs(1), "cpu", fresh, watch=False)
    second = calls.run(GELU, cached, CASE, _inputs(2), "cpu", fresh, watch=False)
    assert second.inputs["x"] is first.inputs["x"] and torch.equal(second.inputs["x"], _inputs(2)["x"])
    assert second.result is not None and second.result.outputs["out"] is first.result.outputs["out"]  # type: ignore[union-attr]


def test_run_records_what_the_checks_need() -> None:
    def writes_its_input(x: torch.Tensor) -> torch.Tensor:
        out = torch.nn.functional.gelu(x, approximate="tanh")
        x.zero_()
        return out

    outcome = calls.run(GELU, writes_its_input, CASE, _inputs(3), "cpu", calls.FreshInputs(), watch=True)
    assert "aten::gelu" in outcome.profile["aten_ops"] and outcome.triton_launches == 0 and outcome.seconds > 0
    assert outcome.changed_inputs() == ["x"]
    unwatched = calls.run(GELU, writes_its_input, CASE, _inputs(3), "cpu", calls.FreshInputs(), watch=False)
    assert unwatched.profile == {}


def test_watched_sees_the_ops_of_one_call_as_timing_watches_it() -> None:
    result, profile, launches = calls.watched(
        GELU, lambda x: torch.nn.functional.gelu(x, approximate="tanh"), _inputs(4), CASE, "cpu"
    )
    assert "aten::gelu" in profile["aten_ops"] and launches == 0 and result.outputs["out"].shape == (8, 16)


# -- launch counting -------------------------------------------------------------------------------


def test_the_compiled_kernels_launcher_is_counted_too() -> None:
    """Triton's fused-softmax tutorial launches `f.warmup(...)`'s compiled kernel by `kernel[grid]`,
    bypassing `JITFunction.run`: its launcher is wrapped as `run` is, in a namespace of its own."""
    from triton.compiler.compiler import CompiledKernel

    watch.LaunchCounter.install()
    getitem = CompiledKernel.__getitem__
    assert getitem.__name__ == "__getitem__" and "grader" not in str(getitem.__globals__.keys())
    assert set(getitem.__code__.co_freevars) == {
        "counter",
        "inside",
        "label",
        "original",
        "span",
        "watching",
        "writers",
    }


@pytest.mark.gpu
def test_a_warmed_up_kernel_launched_by_its_grid_is_counted() -> None:
    from tests.grader.engine.harness.kernel_support import double

    watch.LaunchCounter.install()
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    kernel = double.warmup(x, y, 1000, B=256, grid=(1,))
    kernel._init_handles()
    before = watch.LaunchCounter.total()
    launch = kernel[(4, 1, 1)]
    launch(x, y, 1000, 256)  # a compiled kernel takes its constexprs too (Triton's fused-softmax tutorial)
    launch(x, y, 1000, 256)
    torch.cuda.synchronize()
    assert watch.LaunchCounter.total() - before == 2 and torch.equal(y, 2 * x)


def test_the_drivers_launcher_counts_a_launch_made_outside_triton_run() -> None:
    """A torch.compile'd function launches the student's kernel through inductor, straight to the
    driver's launcher: counted there, once, and not again under `run` (GPU: corpus twin
    `compiled-forward-honest`, timed)."""
    watch.LaunchCounter.install()
    launcher = watch.cuda_launcher()
    if launcher is None:
        pytest.skip("no NVIDIA backend in this Triton")
    before = watch.LaunchCounter.total()
    with pytest.raises(Exception):  # noqa: B017 - not a real launcher: the count comes first
        launcher.__call__(object(), 1, 1, 1, 0, None)
    assert watch.LaunchCounter.total() == before + 1
    watch.LaunchCounter._inside[0] += 1  # as during JITFunction.run, which has counted the launch
    try:
        with pytest.raises(Exception):  # noqa: B017
            launcher.__call__(object(), 1, 1, 1, 0, None)
    finally:
        watch.LaunchCounter._inside[0] -= 1
    assert watch.LaunchCounter.total() == before + 1
