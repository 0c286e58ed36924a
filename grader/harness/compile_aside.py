"""The worker's side of a compile made aside: a kernel missing from Triton's cache is asked of the
orchestrator, which lets go of the GPU while a process without one compiles it
(grader/orchestrator/compile_aside.py); the worker then finds it in its cache.

Triton's JIT calls `triton.compiler.compile` on the first launch of each specialization; that
name is wrapped here, before the submission is imported. Whatever goes wrong with the ask (a
constant that is not plain data, a refusal, a compile server that fails), Triton's own compile
runs in the worker, under the GPU's hold, exactly as without this module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import triton.compiler
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from grader import protocol
from grader.harness import compile_spec

#: sends one ask and returns the answer and its blob (set by `install`)
Channel = Callable[[protocol.CompileAsk], tuple[protocol.CompileAnswer, bytes]]
_CHANNEL: list[Channel] = []
_ROOT: list[str] = []  # the submission's folder: only its own kernels are asked for
_ORIGINAL: list[Callable[..., Any]] = []
_LOCK = threading.Lock()  # one ask at a time on the channel (Triton may compile from threads)


def ask_for(src: Any, target: Any, options: dict[str, Any] | None, env_vars: Any = None) -> protocol.CompileAsk | None:
    """The ask for this compile; None when there is nothing to ask (cached, or not a plain kernel)."""
    if not isinstance(src, ASTSource) or not isinstance(target, GPUTarget):
        return None
    fn = src.fn
    code = getattr(getattr(fn, "fn", None), "__code__", None)
    if code is None or "<locals>" in fn.fn.__qualname__:
        return None  # made inside a function: the compile server could not find it by name
    if _ROOT and not os.path.realpath(code.co_filename).startswith(_ROOT[0]):
        return None  # not the submission's (PyTorch Inductor's, a library's): not importable there
    hash_, metadata = compile_spec.cache_hash(src, target, options, env_vars)
    if compile_spec.cached(hash_, metadata):
        return None
    return protocol.CompileAsk(
        module=str(fn.module),
        qualname=fn.fn.__qualname__,
        line=code.co_firstlineno,
        fn_key=fn.cache_key,
        key=hash_,
        backend=target.backend,
        arch=int(target.arch),
        warp_size=int(target.warp_size),
        spec=compile_spec.encode(src, options),
    )


def _compile(src: Any, target: Any = None, options: Any = None, _env_vars: Any = None) -> Any:
    if _CHANNEL:
        try:
            ask = ask_for(src, target, options, _env_vars)
        except Exception:  # noqa: BLE001 - not askable (a constant that is not data): compiled here
            ask = None
        if ask is not None:
            with _LOCK:
                answer, blob = _CHANNEL[0](ask)
            if answer.compiled:
                try:
                    files = compile_spec.unpack(blob)
                    compile_spec.install(ask.key, f"{src.name[:150]}.json", files)
                except Exception:  # noqa: BLE001 - files that do not install: compiled here instead
                    pass
    return _ORIGINAL[0](src, target=target, options=options, _env_vars=_env_vars)


def install(channel: Channel, root: Path | None = None) -> None:
    """From now on, a compile missing from the cache is asked through `channel` first (only of
    kernels defined under `root`, when given)."""
    _ROOT[:] = [os.path.join(os.path.realpath(root), "")] if root is not None else []
    if not _ORIGINAL:
        _ORIGINAL.append(triton.compiler.compile)
        triton.compiler.compile = _compile  # the name JITFunction's binder imports
    _CHANNEL[:] = [channel]


def uninstall() -> None:
    """Triton's own compile again (tests)."""
    if _ORIGINAL:
        triton.compiler.compile = _ORIGINAL.pop()
    _CHANNEL.clear()


def pipe_channel(req_fd: int, rep_fd: int) -> Channel:
    """The worker's channel: the ask on its reply pipe, the answer on its request pipe."""

    def channel(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes]:
        protocol.send(rep_fd, ask)
        header, blob = protocol.recv(req_fd)
        answer = protocol.parse_request(header)
        if not isinstance(answer, protocol.CompileAnswer):
            raise protocol.ProtocolError("an answer to a compile's ask was due")
        return answer, blob

    return channel
