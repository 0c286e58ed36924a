"""When a worker's share is lifted, and what the grading says: the parts that need no GPU.

The lift itself (a shape that fits the card but not the share, measured; one that fits neither,
skipped with what was free) is graded on a GPU in tests/grader/harness/test_memory_share.py.
"""

from __future__ import annotations

from pathlib import Path

from grader import protocol
from grader.orchestrator import share_lift
from grader.orchestrator.options import GradeOptions
from grader.orchestrator.problem_run import ProblemRun
from grader.sandbox.config import SandboxConfig
from grader.spec.load import load_assignment

SPEC = load_assignment(hidden=False)


def test_a_shape_short_of_the_share_lifts_it_and_says_so_as_the_graders(tmp_path: Path) -> None:
    run = ProblemRun(SPEC.problem("gelu"), tmp_path, "cpu", GradeOptions(device="cpu"), SandboxConfig(device="cpu"))
    assert not run.lift_share and run.output == []
    share_lift.share_short(run, "16384x16384-fp32", "warm")
    assert run.lift_share
    assert run.output == [
        "--- grader ---\n16384x16384-fp32: its first call ran out of GPU memory under the worker's share of the "
        "card; the shape is timed with the GPU held alone and the share lifted to what is free"
    ]


def test_every_request_a_shape_makes_has_words_for_the_output() -> None:
    ops = {
        model.model_fields["op"].default
        for model in (protocol.WarmRequest, protocol.TimeRequest, protocol.LoopRequest, protocol.ProfileRequest)
    }
    assert ops == set(share_lift.WHAT)
