"""The compile server: one problem's submission imported in a process with no GPU, compiling the
kernel specializations its worker asks for (grader/orchestrator/compile_aside.py).

It is spawned like a worker (grader/sandbox/process.py: the same sandbox, user and limits) with
the GPU's device files hidden, so nothing the submission runs here can touch the GPU while the
grading that asked has let go of it. A kernel is found by its module and qualified name, must
have the cache key the worker saw (the same source and dependencies), and is compiled with
Triton's own `compile` for the worker's GPU target; the files of its cache group are handed back.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import triton.compiler
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime import driver
from triton.runtime.jit import JITFunction

from grader import protocol
from grader.harness import compile_spec, start_steps, student_runtime
from grader.harness.gpu_compile import TARGET
from grader.harness.interpreter_driver import TargetOnly
from grader.loading import load_function
from grader.protocol.compiles import TARGET_ENV


def target_from_env() -> TargetOnly:
    """The graded GPU's target and properties (`TARGET_ENV`, read by the orchestrator's driver); the
    H200's target (`gpu_compile.TARGET`) without them."""
    try:
        seen = json.loads(os.environ[TARGET_ENV])
        target = GPUTarget(str(seen["backend"]), int(seen["arch"]), int(seen["warp_size"]))
        return TargetOnly(target, dict(seen["properties"]) if seen.get("properties") else None)
    except (KeyError, ValueError, TypeError):
        return TargetOnly(TARGET)


def find_kernel(module: str, qualname: str, line: int) -> JITFunction | None:  # type: ignore[type-arg]
    """The JITFunction `module.qualname` (through autotune and heuristics wrappers) defined at `line`."""
    if "<locals>" in qualname:
        return None
    obj: Any = sys.modules.get(module)
    if obj is None:
        try:
            obj = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the submission's own module failed: not found
            return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    for _ in range(8):  # Autotuner(Heuristics(JITFunction)): each wrapper's `fn` is the next
        if isinstance(obj, JITFunction) or obj is None:
            break
        obj = getattr(obj, "fn", None)
    if not isinstance(obj, JITFunction) or obj.fn.__code__.co_firstlineno != line:
        return None
    return obj


def compile_one(ask: protocol.CompileAsk) -> tuple[protocol.Message, bytes]:
    """Compile the asked specialization; its files, or why not."""
    started = time.monotonic()
    fn = find_kernel(ask.module, ask.qualname, ask.line)
    if fn is None:
        return protocol.CompileRefused(reason=f"no kernel {ask.module}.{ask.qualname} at line {ask.line}"), b""
    if fn.cache_key != ask.fn_key:
        return protocol.CompileRefused(reason="the kernel's source or dependencies differ from the worker's"), b""
    try:
        signature, constants, attrs, options = compile_spec.decode(ask.spec)
        src = ASTSource(fn, signature, constants, attrs)
        target = GPUTarget(ask.backend, ask.arch, ask.warp_size)
        hash_, metadata = compile_spec.cache_hash(src, target, options)
    except Exception as exc:  # noqa: BLE001 - a malformed ask
        return protocol.CompileRefused(reason=f"the ask could not be read: {type(exc).__name__}: {exc}"[:300]), b""
    if hash_ != ask.key:
        return protocol.CompileRefused(reason="the cache key differs from the worker's"), b""
    try:
        triton.compiler.compile(src, target=target, options=options)
        files = compile_spec.group_files(hash_, metadata)
    except Exception as exc:  # noqa: BLE001 - the compiler's error: the worker meets it again itself
        return protocol.CompileRefused(reason=f"{type(exc).__name__}: {exc}"[:300]), b""
    blob = compile_spec.pack(files)
    return protocol.Compiled(files=sorted(files), seconds=round(time.monotonic() - started, 4)), blob


def serve(args: argparse.Namespace) -> int:
    req_fd, rep_fd = args.req_fd, args.rep_fd
    if not start_steps.go_ahead(req_fd, rep_fd):
        return 0
    driver.set_active(target_from_env())  # for the submission's import; each ask names its own target
    student_runtime.prepare()
    try:
        load_function(Path(args.submission), args.module, args.function)
    except BaseException as exc:  # noqa: BLE001 - the worker reports the submission's import; here: no server
        protocol.send(rep_fd, protocol.ImportFailed(type=type(exc).__name__, message=str(exc)[:500]))
        return 0
    protocol.send(rep_fd, protocol.Ready())
    while True:
        try:
            header, _ = protocol.recv(req_fd)
        except protocol.PeerGone:
            return 0
        request = protocol.parse_request(header)
        if not isinstance(request, protocol.CompileRequest):
            return 0
        reply, blob = compile_one(request.ask)
        protocol.send(rep_fd, reply, blob)


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="grader-compile-server")
    parser.add_argument("--submission", required=True)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--module", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--rep-fd", type=int, required=True)
    code = serve(parser.parse_args(argv))
    sys.stdout.flush()
    os._exit(code)
