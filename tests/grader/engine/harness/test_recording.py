"""What the profiler cannot see by itself (`grader.engine.harness.recording`): op recording switched off
from Python, kernels registered for PyTorch's operators, and modes left on PyTorch's stacks, seen through the one watch
every call goes through (`grader.engine.harness.calls.profiled`)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from grader.engine.harness import calls, recording, watch


def test_switching_op_recording_off_is_refused_and_reported(clean_guard: watch.Guard) -> None:
    # as `watch.arm` does: the recording's switches are in place before the guard's snapshot, so the
    # test passes alone and after any other (it failed in CI when it ran first)
    recording.Recording.install()
    clean_guard.snapshot()
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        torch.autograd._enable_record_function(False)
        torch.nn.functional.gelu(torch.randn(4))
    assert "aten::gelu" in record["aten_ops"]
    assert clean_guard.tampered == ["the profiler (_enable_record_function(False) during the call)"]
    clean_guard.tampered.clear()
    with calls.profiled(record, "cpu"):
        torch._C._autograd._clear_callbacks()
    assert clean_guard.tampered == ["the profiler (_clear_callbacks() during the call)"]


def test_modes_left_by_submission_code_are_taken_off() -> None:
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    class Quiet(TorchFunctionMode):
        pass

    torch.set_default_device("cpu")  # honest code sets it at import: it stays
    try:
        Spy().__enter__()
        Quiet().__enter__()
        assert recording.settle_modes() == ["a TorchDispatchMode left active (Spy)"]
        assert torch._C._len_torch_dispatch_stack() == 0
        stack = [type(torch._C._get_function_stack_at(i)) for i in range(torch._C._len_torch_function_stack())]
        assert stack == [torch.utils._device.DeviceContext]
        assert recording.settle_modes() == []
    finally:
        torch.set_default_device(None)


def test_ops_of_pytorchs_other_namespaces_are_recorded_a_submissions_own_are_not() -> None:
    """XNNPACK's prepacked linear (`prepacked::`) is PyTorch computing; a custom op defined outside
    PyTorch is the submission's own (its ops inside are recorded as they run)."""
    watch.arm()
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - PyTorch registers a namespace as it imports

    @torch.library.custom_op("graderrecordingtest::double", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    spaces = recording.Recording.namespaces
    assert "quantized_decomposed" in spaces and "graderrecordingtest" not in spaces
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        context = torch.ops.prepacked.linear_clamp_prepack(b.t().contiguous(), None)
        torch.ops.prepacked.linear_clamp_run(a, context)
        double(a)
    assert {"prepacked::linear_clamp_prepack", "prepacked::linear_clamp_run"} <= set(record["aten_ops"])
    assert not any(op.startswith("graderrecordingtest::") for op in record["aten_ops"])


def test_a_kernel_for_an_aten_op_through_the_public_api_is_refused() -> None:
    """`torch.library.impl("aten::...")` makes its Library inside torch: the frames up to it reach this
    file (not a PyTorch module's body) first, so it is the caller's registration, refused."""
    watch.arm()
    with pytest.raises(RuntimeError, match="may not register kernels for PyTorch's own operators"):
        torch.library.impl("aten::clone", "AutogradCPU", lambda x, memory_format=None: x)


def test_code_compiled_under_a_pytorch_files_name_is_not_pytorchs() -> None:
    """A module's body is PyTorch's when it is the code PyTorch's file holds: code compiled under the
    name of one of PyTorch's files (its `co_filename` says PyTorch) registering for aten is refused,
    while PyTorch's own modules imported late still register (the test above)."""
    watch.arm()
    path = os.path.join(os.path.dirname(torch.__file__), "library.py")
    source = 'import torch\ntorch.library.Library("aten", "IMPL")\n'
    with pytest.raises(RuntimeError, match="may not register kernels for PyTorch's own operators"):
        exec(compile(source, path, "exec"), {})  # noqa: S102 - the forged module body under test
