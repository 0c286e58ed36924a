"""Triton's tutorials under the interpreter without a GPU (`grader.engine.harness.interpreter_driver`): the
driver's device, target and properties, and `f.warmup(...)`'s compiled kernel, as the fused-softmax
tutorial uses them. Run in a child Python with TRITON_INTERPRET=1 after `student_runtime.prepare`,
as the worker and `pytest handout` run a submission."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.engine.harness import interpreter_driver
from grader.engine.spec import gpu_limits, versions

ROOT = Path(__file__).resolve().parents[4]

TUTORIAL = """
import torch, triton, triton.language as tl
from triton.runtime import driver
from grader.engine.harness import gpu_compile, student_runtime
student_runtime.prepare()

DEVICE = triton.runtime.driver.active.get_active_torch_device()
properties = driver.active.utils.get_device_properties(DEVICE.index)
NUM_SM, NUM_REGS = properties["multiprocessor_count"], properties["max_num_regs"]
SIZE_SMEM, WARP_SIZE = properties["max_shared_mem"], properties["warpSize"]
print(DEVICE, driver.active.get_current_target().arch, NUM_SM, NUM_REGS, SIZE_SMEM, WARP_SIZE)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                   num_stages: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=num_stages):
        cols = tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


x = torch.randn(37, 100, device=DEVICE)
y = torch.empty_like(x)
kernel = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK_SIZE=128, num_stages=4,
                               num_warps=8, grid=(1,))
kernel._init_handles()
occupancy = NUM_REGS // (kernel.n_regs * WARP_SIZE * 8)
if kernel.metadata.shared > 0:
    occupancy = min(occupancy, SIZE_SMEM // kernel.metadata.shared)
programs = min(NUM_SM * occupancy, 5)
gpu_compile.start()
kernel[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), 37, 100, 128, 4)
print(0 < kernel.n_regs <= 255, kernel.n_spills >= 0, kernel.metadata.shared >= 0, programs)
print(torch.allclose(y, torch.softmax(x, dim=1), atol=1e-6), [c.error for c in gpu_compile.taken()])
"""


def test_the_fused_softmax_tutorial_runs_under_the_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "tutorial.py"  # @triton.jit reads its source from a file
    script.write_text(textwrap.dedent(TUTORIAL))
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second, third = done.stdout.split("\n")[:3]
    props = gpu_limits.GPU_PROPERTIES
    expected = f"cpu 90 {props['multiprocessor_count']} {props['max_num_regs']} {props['max_shared_mem']} 32"
    assert first == expected, done.stdout
    assert second == "True True True 5", done.stdout
    assert third == "True [None]", done.stdout  # run in the interpreter, compiled for the GPU by the launch too


def test_what_the_stand_in_driver_cannot_do_gets_the_hint() -> None:
    driver = interpreter_driver.TargetOnly(interpreter_driver.gpu_compile.TARGET, {})
    with pytest.raises(AttributeError) as raised:
        driver.get_benchmarker()  # type: ignore[attr-defined]
    hint = versions.hint(f"AttributeError: {raised.value}")
    assert hint is not None and "runs on a GPU only" in hint
    assert versions.hint("RuntimeError: 0 active drivers ([]). There should only be one.")


@pytest.mark.gpu
def test_the_stand_in_properties_are_the_graded_gpus() -> None:
    """On the graded GPU: what the interpreter answers is what Triton's driver reports there."""
    from triton.runtime import driver

    seen = driver.active.utils.get_device_properties(0)
    assert {key: seen[key] for key in gpu_limits.GPU_PROPERTIES} == gpu_limits.GPU_PROPERTIES
