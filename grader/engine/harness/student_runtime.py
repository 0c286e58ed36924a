"""The process a submission runs in: the same settings in the grader's worker and in `pytest handout`.

The grader runs every case of a problem, and then its timed shapes, in one worker process; a
student's own run usually sees a few shapes. Whatever state a process accumulates per shape must
therefore not turn the grader's longer run into a failure the student never sees. Seen on the
H200: a `@torch.compile(fullgraph=True)` backward passed every CPU case and `pytest handout`, then
failed the GPU suite's ninth distinct case with `FailOnRecompileLimitHit`, because dynamo gives up
recompiling one function after 8 versions by default. Here the limit is raised well past what the
grader's cases and shapes can ask for (each version is still compiled once and reused).

`prepare()` is called by the worker before the submission is imported and by
grader/engine/handout/support.py when the handout's tests start.
"""

from __future__ import annotations

from grader.engine.harness import gpu_compile, interpreter_compat, interpreter_driver, kernel_rules

#: versions of one compiled function (shapes, dtypes, flags) before dynamo gives up on it; the GPU
#: suite's cases and timed shapes of one problem need about 20 at most
RECOMPILE_LIMIT = 64
ACCUMULATED_RECOMPILE_LIMIT = 1024


def prepare() -> None:
    """Settings every submission gets, before it is imported."""
    kernel_rules.install()  # only Triton's own functions are builtins, on every device
    if interpreter_compat.install():  # @triton.autotune without a GPU driver (no-op on a GPU)
        gpu_compile.install()  # every interpreted launch also compiled for the graded GPU
        interpreter_driver.install()  # Triton's tutorials' driver calls and warmups, without a GPU
    try:
        import torch._dynamo.config as dynamo
    except ImportError:  # pragma: no cover - a torch without dynamo cannot compile anyway
        return
    dynamo.recompile_limit = max(dynamo.recompile_limit, RECOMPILE_LIMIT)
    dynamo.accumulated_recompile_limit = max(dynamo.accumulated_recompile_limit, ACCUMULATED_RECOMPILE_LIMIT)
