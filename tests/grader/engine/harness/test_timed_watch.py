"""A chunk of timed rounds run again under the profiler (`grader.engine.harness.timed_watch`): only what
runs inside the submission's calls counts, whatever thread runs it, and nothing a call can query
says the profiler is on. Checked on CPU tensors; the timing loop that drives it needs a GPU
(the corpus entries `torch-beside-triton-when-timed` and `cuda-graph-replay`)."""

from __future__ import annotations

import threading
from typing import Any

import torch

from grader.engine import protocol
from grader.engine.assignment.load import load_assignment
from grader.engine.harness import calls, timed_watch
from grader.engine.judge.performance import watched_flags
from grader.engine.judge.windows import watch_round
from grader.engine.problems import REGISTRY

GELU = REGISTRY["gelu"]
CASE = GELU.case_model.model_validate({"name": "t", "suite": "gpu", "shape": [8, 16], "dtype": "float32"})


def _chunk(fn: Any, rounds: int = 4) -> protocol.WatchedChunk:
    """A watched chunk as the timing loop runs it: harness work between rounds, each call ranged."""
    x = torch.randn(8, 16)
    watch = timed_watch.ChunkProfiler([GELU.timed(timed_watch.ranged(fn), {"x": x})], 0, None, "cpu")
    picked = watch.pick(0, rounds)
    assert picked is not None
    chunk_calls, size = picked
    with watch.watching(size):
        for _ in range(size):
            x.mul_(1.0).exp_()  # the harness's refill: ops off the allow-list, but not the submission's
            chunk_calls[0]()
    assert len(watch.watched) == 1
    return watch.watched[0]


def test_only_ops_inside_the_calls_count() -> None:
    honest = _chunk(lambda x: x.clone())
    assert "aten::mul" not in honest.aten_ops and "aten::exp" not in honest.aten_ops
    assert "aten::clone" in honest.aten_ops
    cheat = _chunk(lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    assert "aten::gelu" in cheat.aten_ops and cheat.rounds >= 1


def test_ops_of_a_thread_the_call_waits_for_count() -> None:
    def threaded(x: torch.Tensor) -> torch.Tensor:
        out: list[torch.Tensor] = []
        worker = threading.Thread(target=lambda: out.append(torch.nn.functional.gelu(x)))
        worker.start()
        worker.join()
        return out[0]

    assert "aten::gelu" in _chunk(threaded).aten_ops


def test_a_watched_call_cannot_see_the_profiler() -> None:
    seen: list[Any] = []

    def curious(x: torch.Tensor) -> torch.Tensor:
        seen.append(
            (
                torch.autograd._profiler_enabled(),
                torch.autograd.profiler._is_profiler_enabled,
                torch._C._autograd._profiler_type(),
            )
        )
        return x.clone()

    _chunk(curious, rounds=3)
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        curious(torch.ones(2))
    outside = (torch.autograd._profiler_enabled(), False, torch._C._autograd._profiler_type())
    assert seen and all(s == outside for s in seen), (seen, outside)


def test_the_chunk_is_watched_once_where_it_was_drawn() -> None:
    watch = timed_watch.ChunkProfiler([], 25, None, "cpu")
    assert watch.pick(0, 20) is None  # round 25 is not in rounds 0-19
    assert watch.pick(20, 20) is not None
    assert watch.pick(40, 20) is None  # once per window


def test_the_watched_round_is_drawn_from_the_secret() -> None:
    shape = {"seed": 7, "verify_seed": 1234}
    assert watch_round(shape, 0, 50) is None  # the first window's first call is watched already
    drawn = [watch_round(shape, w, 50) for w in range(1, 40)]
    assert all(d is not None and 0 <= d < 50 for d in drawn) and len(set(drawn)) > 10
    assert drawn == [watch_round(shape, w, 50) for w in range(1, 40)]  # the orchestrator can redraw it
    assert drawn != [watch_round({"seed": 7, "verify_seed": 999}, w, 50) for w in range(1, 40)]


def test_a_broken_chunk_flags_the_shape_in_the_kernel_rules_words() -> None:
    problem = load_assignment().problem("gelu")
    ok = protocol.WatchedChunk(first_round=30, rounds=10, aten_ops=["aten::empty"], triton_launches=10)
    assert watched_flags(problem, CASE, [ok]) == []
    torch_path = ok.model_copy(update={"aten_ops": ["aten::gelu"]})
    (flag,) = watched_flags(problem, CASE, [ok, torch_path])
    assert flag.startswith("timed rounds 30-39") and "aten::gelu" in flag
    assert "everything else it computes must be in a kernel" in flag
    graph = ok.model_copy(update={"graph_launches": 10})
    assert "CUDA graph" in watched_flags(problem, CASE, [graph])[0]
