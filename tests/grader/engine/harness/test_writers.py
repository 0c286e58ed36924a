"""The writer check (`grader.engine.harness.writers`): a watched forward returns what its Triton kernels
stored, moved only by the kernel rule's copies, and no tensor changes with no op or launch writing
it. Each refusal beside the honest code it must not refuse."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from grader.engine import protocol
from grader.engine.harness import calls, watch, writers

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="Triton's interpreter runs the launches on a CPU")


def _double(x: torch.Tensor, out: torch.Tensor) -> None:
    from tests.grader.engine.harness.kernel_support import double

    double[(triton_blocks(x.numel()),)](x, out, x.numel(), B=64)


def triton_blocks(n: int) -> int:
    return (n + 63) // 64


def _through_address(t: torch.Tensor) -> np.ndarray:
    """`t`'s float32 memory as a NumPy array: no PyTorch op runs."""
    return np.frombuffer((ctypes.c_float * t.numel()).from_address(t.data_ptr()), dtype=np.float32)


def _judged(fn: Callable[[torch.Tensor], Any]) -> protocol.Unwritten | None:
    """`fn(x)` called as a correctness call calls it: watched, the writer check on."""
    watch.arm()
    profile: dict[str, Any] = {}
    x = torch.randn(256)
    with calls.profiled({}, "cpu"):
        calls._snapshotting(fn, "cpu", {}, profile)(x)
    assert writers.ACTIVE[0] is None and torch._C._len_torch_dispatch_stack() == 0
    return profile["unwritten"]


def test_a_kernels_output_returned_passes() -> None:
    def honest(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _double(x, out)
        return out.view(16, 16)

    assert _judged(honest) is None


def test_a_cast_or_copy_of_a_kernels_output_passes() -> None:
    def cast(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _double(x, y)
        return y.to(torch.float16)

    def copied(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _double(x, y)
        out = torch.zeros(2, 256)
        out[1].copy_(y)
        return out

    assert _judged(cast) is None
    assert _judged(copied) is None


def test_a_buffer_written_by_one_kernel_and_read_by_another_passes() -> None:
    def two_passes(x: torch.Tensor) -> torch.Tensor:
        scratch, out = torch.empty_like(x), torch.empty_like(x)
        _double(x, scratch)
        _double(scratch, out)
        return out

    assert _judged(two_passes) is None


def test_numpy_writing_the_output_through_its_address_fails() -> None:
    def cheat(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _double(x, out)
        _through_address(out)[...] = np.tanh(_through_address(x))
        return out

    found = _judged(cheat)
    assert found is not None and found.what == "changed_outside"
    assert "made by aten::empty_like" not in found.detail and "before it was returned" in found.detail


def test_numpy_writing_a_scratch_a_kernel_then_copies_fails() -> None:
    def cheat(x: torch.Tensor) -> torch.Tensor:
        scratch, out = torch.empty_like(x), torch.empty_like(x)
        _through_address(scratch)[...] = np.tanh(_through_address(x))
        _double(scratch, out)
        return out

    found = _judged(cheat)
    assert found is not None and found.what == "changed_outside"
    assert "made by aten::empty_like changed before a Triton launch" in found.detail


def test_what_no_kernel_wrote_fails() -> None:
    def filled_after(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _double(x, out)
        return out.fill_(1.0)

    def a_copy_of_the_input(x: torch.Tensor) -> torch.Tensor:
        _double(x, torch.empty_like(x))
        return x.clone()

    found = _judged(filled_after)
    assert found is not None and found.what == "not_written" and "written by aten::fill_" in found.detail
    found = _judged(a_copy_of_the_input)
    assert found is not None and found.what == "not_written" and "made by aten::clone" in found.detail


def test_a_custom_op_returning_its_launchs_output_passes() -> None:
    @torch.library.custom_op("grader_test_writers::doubled", mutates_args=())
    def doubled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _double(x, out)
        return out

    assert _judged(lambda x: doubled(x)) is None


def test_a_mode_taken_off_the_stack_is_reported() -> None:
    watch.arm()
    check = writers.Writers(watch.LaunchCounter._inside, watch.LaunchCounter.total)
    check.start((), {})
    torch._C._pop_torch_dispatch_stack(None)
    assert check.stop() is False and writers.ACTIVE[0] is None


def test_what_a_kernel_copies_from_memory_no_op_made_is_from_outside() -> None:
    def laundered(x: torch.Tensor) -> torch.Tensor:
        computed = torch.from_numpy(np.tanh(_through_address(x)))  # NumPy's result: no op made it
        out = torch.empty_like(x)
        _double(computed.clone(), out)  # a copy of it is from outside too
        return out

    found = _judged(laundered)
    assert found is not None and found.what == "from_outside" and "written by your kernel double" in found.detail


def test_a_tensor_made_before_the_call_is_what_it_is() -> None:
    table = torch.from_numpy(np.linspace(0.0, 1.0, 256, dtype=np.float32))  # a constant, made at import
    writers._SYNCED[0] = -1  # as in a worker that has just imported the submission

    def reads_a_constant(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _double(table, out)
        return out

    assert _judged(reads_a_constant) is None


@pytest.mark.parametrize(
    "past",
    [
        lambda x: torch.ops.aten.tanh.default.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CPU), x),
        lambda x: torch.ops.aten.tanh.default._op_dk(torch._C.DispatchKey.CPU, x),
        lambda x: torch.library.get_kernel("aten::tanh", "CPU").call_boxed(torch._C.DispatchKeySet("CPU"), x),
    ],
    ids=["redispatch", "op_dk", "call_boxed"],
)
def test_an_op_run_past_the_dispatcher_makes_memory_from_outside(past: Callable[[torch.Tensor], Any]) -> None:
    """No event records such an op, and no dispatch mode sees it: what it makes is memory no op made."""

    def returned(x: torch.Tensor) -> torch.Tensor:
        _double(x, torch.empty_like(x))
        return past(x)

    def copied_by_a_kernel(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _double(past(x), out)
        return out

    found = _judged(returned)
    assert found is not None and found.what in ("not_written", "from_outside")
    found = _judged(copied_by_a_kernel)
    assert found is not None and found.what == "from_outside"
