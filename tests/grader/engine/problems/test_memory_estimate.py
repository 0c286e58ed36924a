"""The GPU memory estimate on meta tensors (`grader.engine.problems.memory_estimate`): what it counts, what
it leaves alone, and what it reports instead of raising."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import KernelInterface

from grader.engine.assignment.load import load_assignment
from grader.engine.loading import load_function
from grader.engine.problems import REGISTRY
from grader.engine.problems.memory_estimate import GIB, LiveBytes, estimate, gib, triton_launches_skipped

ROOT = Path(__file__).resolve().parents[4]
SPEC = load_assignment(hidden=False)
BENCHMARKS = [(p.name, c) for p in SPEC.problems for c in p.benchmarks]


def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(*shape, device="meta", dtype=dtype)


def test_views_and_in_place_ops_allocate_nothing_and_dead_storages_are_subtracted() -> None:
    before = meta(1024)  # made before counting: an input
    with LiveBytes() as counter:
        a = meta(256)  # 1 KiB
        view = a.view(16, 16).t()
        a.mul_(2)
        before.add_(1)
        _ = before[:10].detach()
        assert counter.live == 1024
        del a, view
        assert counter.live == 0
        kept = meta(512)  # 2 KiB: the peak, alone
    assert (counter.peak, counter.live) == (2048, 2048)
    assert [a.nbytes for a in counter.at_peak] == [2048] and kept.shape == (512,)


def test_the_peak_is_of_what_lives_together() -> None:
    with LiveBytes() as counter:
        a = meta(256)
        b = meta(512)
        del a, b
        c = meta(128)
    counter.close()
    assert counter.peak == 3072 and c.numel() == 128


def test_counting_keeps_no_tensor_alive() -> None:
    counter = LiveBytes()
    with counter:
        t = meta(64) * 2
        ref = weakref.ref(t)
        del t
    gc.collect()
    assert ref() is None and counter.live == 0
    counter.close()


def test_reading_values_is_named() -> None:
    with pytest.raises(RuntimeError, match=r"\.item\(\)"), LiveBytes():
        meta(4).sum().item()
    with pytest.raises(RuntimeError, match="copies a tensor's values to cpu"), LiveBytes():
        meta(4).cpu()


@triton.jit
def _fill(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0, mask=offs < n)


def _runs() -> dict[type, object]:
    found, todo = {}, [KernelInterface]
    while todo:
        klass = todo.pop()
        if "run" in vars(klass):
            found[klass] = vars(klass)["run"]
        todo += klass.__subclasses__()
    return found


def test_triton_launches_on_meta_do_nothing_and_every_run_is_put_back() -> None:
    before = _runs()
    with triton_launches_skipped():
        _fill[(1,)](meta(8), 8, BLOCK=8)  # would fail on a meta pointer, if launched
        real = torch.zeros(8, device="cuda" if torch.cuda.is_available() else "cpu")
        _fill[(1,)](real, 8, BLOCK=8)  # a real tensor is still launched
    assert real.sum().item() == 8
    with pytest.raises(ValueError), triton_launches_skipped():
        raise ValueError("a failing submission")
    assert _runs() == before


@pytest.mark.parametrize(("problem", "case"), BENCHMARKS, ids=[f"{p}-{c.name}" for p, c in BENCHMARKS])
def test_meta_inputs_have_the_benchmark_shapes_and_no_data(problem: str, case: object) -> None:
    inputs = REGISTRY[problem].meta_inputs(case)
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    assert tensors and all(t.device.type == "meta" for t in tensors)
    shape = getattr(case, "shape", None)
    if shape is not None:
        assert list(inputs["x"].shape) == list(shape)


@pytest.mark.parametrize(("problem", "case"), BENCHMARKS, ids=[f"{p}-{c.name}" for p, c in BENCHMARKS])
def test_the_reference_fits_every_budget(problem: str, case: object) -> None:
    p = SPEC.problem(problem)
    fn = load_function(ROOT / "reference", p.module, p.function)
    result = estimate(REGISTRY[problem], fn, case, ROOT / "reference")
    assert result.fits, result.summary()
    assert result.summary().startswith(f"{case.name}: estimated peak ")


def test_a_one_tensor_output_is_its_own_bytes() -> None:
    case = SPEC.problem("gelu").benchmarks[0]
    fn = load_function(ROOT / "reference", "gelu", "triton_gelu")
    result = estimate(REGISTRY["gelu"], fn, case, ROOT / "reference")
    assert case.shape == [16384, 16384] and case.dtype == "float32"
    assert result.peak_bytes == GIB and gib(result.peak_bytes) == "1 GiB"


def test_the_stub_is_not_implemented_not_an_estimate() -> None:
    case = SPEC.problem("softmax").benchmarks[0]
    fn = load_function(ROOT / "student_template", "softmax", "triton_softmax")
    result = estimate(REGISTRY["softmax"], fn, case, ROOT / "student_template")
    assert result.not_implemented and result.peak_bytes is None and result.fits is None
    assert result.note.startswith("NotImplementedError: ")


def test_a_compiled_function_runs_eagerly_and_says_so() -> None:
    folder = ROOT / "tests" / "honest" / "submissions" / "fa-compiled-bwd"
    fn = load_function(folder, "flash_attention", "flash_attention")
    case = SPEC.problem("flash_attention").benchmarks[0]
    result = estimate(REGISTRY["flash_attention"], fn, case, folder)
    assert result.peak_bytes is not None and result.fits
    assert "_attn_backward ran eagerly" in result.note and "compiled, it may fuse" in result.note
