"""The messages of a compile made aside (grader/orchestrator/compile_aside.py): a worker that
holds the GPU asks, mid-call, for a kernel to be compiled by a process that has no GPU, so that
the grading can let go of the GPU while the compiler runs on the CPU."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from grader.protocol.base import Message

#: the most files, and bytes in all, a compile's group may hand over (a kernel's IR stages and
#: its binary are a few hundred kB)
MAX_FILES = 16
MAX_BYTES = 64 << 20
#: the graded GPU as the orchestrator's Triton driver sees it, JSON (backend, arch, warp_size and the
#: device properties Triton's driver reports), in a compile server's environment
TARGET_ENV = "GRADER_COMPILE_TARGET"


class CompileAsk(Message):
    """From a worker, on its reply channel, in the middle of a request: compile this specialization.

    `key` is the hash of Triton's cache key as the worker computed it; the compile server computes
    its own and refuses on any difference, so what it hands back is exactly what the worker's own
    compile would have written to its cache."""

    status: Literal["compile"] = "compile"
    module: str
    qualname: str
    line: int
    #: the kernel's `JITFunction.cache_key` (its source and what it depends on)
    fn_key: str
    key: str
    #: GPUTarget's fields: backend, arch, warp size
    backend: str
    arch: int
    warp_size: int
    #: JSON: signature, constants, attributes and options, as `triton.runtime.jit` serializes them
    spec: str


class Compiled(Message):
    """The compile server's files for the key (the blob: a zip of stored entries, `compile_spec.pack`)."""

    status: Literal["compiled"] = "compiled"
    files: list[str]
    seconds: float


class CompileRefused(Message):
    """The compile server would not or could not: the worker compiles it itself, as without it."""

    status: Literal["refused"] = "refused"
    reason: str


class CompileRequest(Message):
    """To the compile server: one ask, forwarded."""

    op: Literal["compile"] = "compile"
    replies: ClassVar[dict[str, type[Message]]] = {"compiled": Compiled, "refused": CompileRefused}
    ask: CompileAsk


class CompileAnswer(Message):
    """To the worker, on its request channel: its ask is done (the blob: the files to install)."""

    op: Literal["compile_answer"] = "compile_answer"
    compiled: bool
    reason: str = ""


#: what a worker's reply channel may carry in the middle of any request
ASKS: dict[str, Any] = {"compile": CompileAsk}
