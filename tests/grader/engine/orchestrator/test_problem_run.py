"""ProblemRun's parts that need no worker: the timed rounds' checks made after the exclusive window.

The checks draw a shape's inputs again on the GPU while other gradings' workers hold memory, so
they may run out of it; a check that does is made again with the GPU held alone, and one that
runs out even then withholds the shape's points with a reason instead of ending the grading.
The out-of-memory error is raised by a stand-in check (the CPU cannot run out of GPU memory);
the checks' real work is tested in tests/grader/engine/harness/test_timed_rounds.py.
"""

from __future__ import annotations

from pathlib import Path

import torch

from grader.engine import protocol
from grader.engine.assignment.load import load_assignment
from grader.engine.judge import performance, round_checks
from grader.engine.orchestrator import gpu_lease, problem_result, timed_shapes
from grader.engine.orchestrator.options import GradeOptions
from grader.engine.orchestrator.problem_run import ProblemRun
from grader.engine.records.model import ShapeTiming
from grader.engine.sandbox.config import SandboxConfig

SPEC = load_assignment(hidden=False)


class ShortOfMemory(round_checks.ShapeChecks):
    """A shape's checks that run out of GPU memory the first `times` times they are made."""

    def __init__(self, shape: ShapeTiming, times: int, flags: list[str]) -> None:
        problem = SPEC.problem("gelu")
        case = problem.benchmarks[0]
        side = performance.ReferenceSide(None, problem, lambda x: x)  # type: ignore[arg-type]
        super().__init__(side, case, performance.ShapeSeeds.draw("s", "gelu", case), [], shape)
        self.times, self.flags, self.made = times, flags, 0

    def run(self) -> list[str]:
        self.made += 1
        if self.made <= self.times:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        self.shape.flags += self.flags
        return self.flags


def problem_run(tmp_path: Path) -> ProblemRun:
    return ProblemRun(SPEC.problem("gelu"), tmp_path, "cpu", GradeOptions(device="cpu"), SandboxConfig(device="cpu"))


def shape() -> ShapeTiming:
    return ShapeTiming(name="16384x16384-fp32", case="", ratio=1.0, ratio_low=0.99, ratio_high=1.01)


def test_a_check_short_of_memory_beside_others_is_made_again_alone(tmp_path: Path) -> None:
    run, honest = problem_run(tmp_path), shape()
    run.checks = [ShortOfMemory(honest, times=1, flags=[])]
    timed_shapes.check_timed_rounds(run)
    assert run.checks[0].made == 2 and honest.flags == []
    assert performance.score(SPEC.problem("gelu"), [honest], "H200").status == "measured"


def test_a_wrong_round_found_on_the_second_try_still_withholds_the_points(tmp_path: Path) -> None:
    run, wrong = problem_run(tmp_path), shape()
    run.checks = [ShortOfMemory(wrong, times=1, flags=["timed round 3 computed a wrong result"])]
    timed_shapes.check_timed_rounds(run)
    graded = performance.score(SPEC.problem("gelu"), [wrong], "H200")
    assert graded.status == "flagged" and graded.score == 0 and "wrong result" in graded.reason


def test_a_check_that_never_fits_flags_its_shape_not_the_grading(tmp_path: Path) -> None:
    run, unchecked = problem_run(tmp_path), shape()
    run.checks = [ShortOfMemory(unchecked, times=2, flags=[])]
    timed_shapes.check_timed_rounds(run)
    graded = performance.score(SPEC.problem("gelu"), [unchecked], "H200")
    assert graded.status == "flagged" and graded.score == 0
    assert "could not be checked (out of GPU memory" in graded.reason


def test_out_of_memory_beside_other_gradings_is_marked_as_contention(tmp_path: Path) -> None:
    # the record's `contended` tells a batch to grade the student again alone; a CPU grading (no
    # lease: nothing shared) and any other failure leave it unset
    run = problem_run(tmp_path)
    oom = protocol.Failed(type="OutOfMemoryError", message="CUDA out of memory", fatal=True)
    run.note_failure(oom)
    assert run.contended is None
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    run.lease = gpu_lease.GpuLease("gpu-test", folder)
    run.note_failure(protocol.Failed(type="ValueError", message="bad shape"))
    assert run.contended is None
    run.note_failure(oom)
    assert run.contended == "out_of_memory"


# writes a compiled-kernel file into its Triton cache as it is imported
WRITES_A_KERNEL = """
import os
from pathlib import Path
kernel = Path(os.environ["TRITON_CACHE_DIR"]) / "KEY" / "gelu.cubin"
kernel.parent.mkdir(parents=True, exist_ok=True)
kernel.write_text("compiled")
"""


def test_the_kernel_cache_is_copied_after_the_window_not_inside_it(make_submission, tmp_path: Path) -> None:
    """`measure` (the GPU held alone) stops the worker and only holds its cache; `finish` copies it."""
    gelu = (Path(__file__).resolve().parents[4] / "examples" / "submissions" / "correct" / "gelu.py").read_text()
    options = GradeOptions(device="cpu", kernel_cache=tmp_path / "kernels")
    run = ProblemRun(
        SPEC.problem("gelu"),
        make_submission(gelu=gelu + WRITES_A_KERNEL),
        "cpu",
        options,
        SandboxConfig(device="cpu"),
        "a" * 64,
    )
    try:
        run.spawn()
        tests = run.check()
        assert tests and all(t.status == "passed" for t in tests), tests
        timed_shapes.measure(run, tests)
        held = run.held_kernels
        assert run.worker is None and held is not None  # stopped, its cache held
        assert run.kernel_slot is not None and not run.kernel_slot.exists()  # nothing copied in the window
        problem_result.finish(run, tests)
        assert (run.kernel_slot / "KEY" / "gelu.cubin").read_text() == "compiled"
        assert run.held_kernels is None and held.ns_fd == -1  # let go of once copied
    finally:
        run.close()
