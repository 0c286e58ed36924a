"""What the graded GPU refuses that Triton's interpreter runs, and what to do about each.

Shared by the trusted checks (`grader.engine.judge.checks.gpu_compile_check`, on the compiles a CPU call
reports) and by the worker and the handout (an error the interpreter itself raises for the same
reason, such as a block past Triton's element limit), so a student reads one hint everywhere.
"""

from __future__ import annotations

#: shared memory one program may use on the graded GPU: an H200 (sm_90) gives a block at most 227 KiB
GPU_SHARED_BYTES = 232448

#: what Triton's driver reports for the graded GPU (`driver.active.utils.get_device_properties`),
#: the keys Triton's tutorials read at import; Triton's interpreter on a CPU answers with these
#: (`grader.engine.harness.interpreter_driver`). 132 SMs: docs/performance.md's H200; 64 Ki registers and
#: 227 KiB of shared memory per block, 32 threads per warp: compute capability 9.0's limits
GPU_PROPERTIES = {
    "multiprocessor_count": 132,
    "max_num_regs": 65536,
    "max_shared_mem": GPU_SHARED_BYTES,
    "warpSize": 32,
}

#: (text in the compiler's or interpreter's message, what usually causes it and the fix)
COMPILE_HINTS = (
    (
        "Cannot access global variable",
        "a @triton.jit function may read only globals made with tl.constexpr (`SCALE = tl.constexpr(0.5)`); "
        "write the number inside the kernel or pass it as an argument",
    ),
    (
        "Unsupported function referenced",
        "a @triton.jit function may name only other @triton.jit functions and Triton's own (tl.*): the GPU "
        "compiler reads every name in the kernel's body, a branch that never runs included, and refuses a plain "
        "Python function; make the helper @triton.jit, or choose between functions outside the kernel "
        "(`act = fast_gelu if FAST else gelu`, both @triton.jit)",
    ),
    (
        "exceeds triton maximum tensor numel",
        "a Triton block holds at most 1048576 (2**20) elements: walk a long row in blocks (online softmax) "
        "instead of loading it as one block",
    ),
)


def hint(message: str) -> str | None:
    """The hint for a GPU compile rule `message` breaks, or None."""
    return next((text for pattern, text in COMPILE_HINTS if pattern in message), None)
