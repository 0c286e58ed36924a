"""The untrusted side of grading: imports one submission module and runs the calls it is sent.

This process is started by `grader.sandbox` (spawned, never forked from the orchestrator), with
no secret in its environment, under resource limits and, when the grader runs as root, as an
unprivileged user in a mount namespace that hides the reference, the hidden cases and the results.
Everything it sends back is data for the orchestrator to check: its notes (exact output types,
aliasing, profiled ops) can be forged by a submission that attacks this file, but the output
values for fresh inputs cannot be produced without computing them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from grader import protocol
from grader.problems import REGISTRY
from grader.problems.base import CallOutput

MAX_MESSAGE = 4000


class LaunchCounter:
    """Counts Triton kernel launches by wrapping `run` of Triton's JIT and interpreter functions."""

    count = 0

    @classmethod
    def install(cls) -> None:
        import triton.runtime.jit as jit

        targets = [jit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - older triton
            pass
        for klass in targets:
            original = klass.run

            def run(self: Any, *args: Any, __original: Callable[..., Any] = original, **kwargs: Any) -> Any:
                if not kwargs.get("warmup", False):
                    cls.count += 1
                return __original(self, *args, **kwargs)

            klass.run = run  # type: ignore[method-assign]


def _trim(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE // 2] + "\n[...]\n" + text[-MAX_MESSAGE // 2 :]


def _describe_exception(exc: BaseException, submission: Path) -> dict[str, Any]:
    """The error as a student should see it: their own frames only, paths relative to the submission."""
    root = str(submission) + os.sep
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(root)]
    tb = "".join(traceback.format_list(frames[-10:])) + "".join(traceback.format_exception_only(type(exc), exc))
    tb = tb.replace(root, "")
    kind = type(exc).__name__
    if isinstance(exc, SystemExit):
        summary = f"the submission called sys.exit({exc.code!r})"
    elif isinstance(exc, KeyboardInterrupt):
        summary = "the submission raised KeyboardInterrupt"
    else:
        summary = f"{kind}: {exc}".replace(root, "")
    text = str(exc)
    fatal = isinstance(exc, torch.OutOfMemoryError) or "CUDA error" in text or "illegal memory access" in text
    return {"status": "error", "type": kind, "message": _trim(summary), "traceback": _trim(tb), "fatal": fatal}


def load_function(submission: Path, module: str, function: str) -> Callable[..., Any]:
    """Import `module.py` from the submission folder and return its `function`."""
    path = submission / f"{module}.py"
    if not path.is_file():
        raise FileNotFoundError(f"the submission has no {module}.py")
    sys.path.insert(0, str(submission))
    spec = importlib.util.spec_from_file_location(module, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    fn = getattr(mod, function, None)
    if fn is None:
        raise AttributeError(f"{module}.py defines no {function}")
    if not callable(fn):
        raise TypeError(f"{module}.{function} is not callable")
    return fn


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.uint8).clone()


def input_bits(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A bit-exact copy of every input tensor (NaN payloads included), to spot mutation."""
    return {k: _bits(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def changed_inputs(inputs: dict[str, Any], before: dict[str, torch.Tensor]) -> list[str]:
    return [k for k, bits in before.items() if not torch.equal(_bits(inputs[k]), bits)]


def describe_outputs(result: CallOutput, inputs: dict[str, Any], device: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per output: the facts a copy would erase (exact type, device, aliasing), and the copy itself."""
    spans = {k: _storage_span(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    meta: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    for name, value in result.outputs.items():
        info: dict[str, Any] = {"type": f"{type(value).__module__}.{type(value).__qualname__}"}
        if isinstance(value, torch.Tensor):
            start, end = _storage_span(value)
            info.update(
                exact=type(value) is torch.Tensor,
                device=value.device.type,
                dtype=str(value.dtype).removeprefix("torch."),
                shape=list(value.shape),
                stride=list(value.stride()),
                aliases=[k for k, (s, e) in spans.items() if start < e and s < end and end > start],
            )
            # a plain, contiguous CPU copy of the values: subclass behaviour cannot survive it
            payload[name] = torch.Tensor.detach(value).as_subclass(torch.Tensor).to("cpu").contiguous().clone()
        else:
            payload[name] = None
        meta[name] = info
    meta["_notes"] = result.notes
    return meta, payload


@contextmanager
def _profiled(record: dict[str, Any], device: str) -> Iterator[None]:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    start = LaunchCounter.count
    with profile(activities=activities) as prof:
        yield
        if device == "cuda":
            torch.cuda.synchronize()
    events = prof.events()
    record["aten_ops"] = sorted({e.name for e in events if e.name.startswith("aten::")})
    record["gpu_kernels"] = sorted({e.name for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA})[:50]
    record["triton_launches"] = LaunchCounter.count - start


def handle_call(problem_name: str, fn: Callable[..., Any], header: dict[str, Any], blob: bytes, device: str, submission: Path) -> tuple[dict[str, Any], bytes]:
    problem = REGISTRY[problem_name]
    case = problem.case_model.model_validate(header["case"])
    inputs = protocol.unpack_tensors(blob, map_location=device)
    before = input_bits(inputs)
    profile: dict[str, Any] = {}
    watch = (lambda: _profiled(profile, device)) if header.get("profile") else None
    # uninitialised memory is filled with NaN, so an output element the kernel never wrote shows
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    launches = LaunchCounter.count
    try:
        result = problem.call(fn, inputs, case, watch) if watch else problem.call(fn, inputs, case)
        if device == "cuda":
            torch.cuda.synchronize()
        meta, payload = describe_outputs(result, inputs, device)
    except BaseException as exc:  # noqa: BLE001 - the student's error is a result to report
        return _describe_exception(exc, submission), b""
    changed = changed_inputs(inputs, before)
    reply = {
        "status": "ok",
        "meta": meta,
        "inputs_changed": changed,
        "triton_launches": LaunchCounter.count - launches,
        "profile": profile or None,
    }
    return reply, protocol.pack_tensors(payload)


class Timer:
    """The worker's half of timing: the student's kernel on inputs it draws itself on the GPU.

    Benchmark inputs need no secrecy (only their shape matters), so they are made here rather
    than shipped through the pipe; prepared calls are kept for the case being timed.
    """

    def __init__(self, problem_name: str, fn: Callable[..., Any]) -> None:
        self.kind = REGISTRY[problem_name]
        self.fn = fn
        self.key: tuple[Any, ...] | None = None
        self.calls: list[Callable[[], Any]] = []

    def _prepare(self, header: dict[str, Any]) -> list[Callable[[], Any]]:
        from grader.problems.base import generator

        key = (header["case"]["name"], header["seed"], header["sets"])
        if key != self.key:
            self.calls, self.key = [], None
            torch.cuda.empty_cache()
            case = self.kind.case_model.model_validate(header["case"])
            for i in range(header["sets"]):
                inputs = self.kind.make_inputs(case, generator(header["seed"] + i, "cuda"))
                self.calls.append(self.kind.timed(self.fn, inputs))
            self.key = key
        return self.calls

    def handle(self, header: dict[str, Any], submission: Path) -> dict[str, Any]:
        from grader import timing

        # timing runs without the NaN fill of correctness calls: it would add a write to every empty()
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
        try:
            calls = self._prepare(header)
            launches = LaunchCounter.count
            if header["op"] == "time":
                measured = timing.measure(calls, header["budget_s"], warm=header.get("warm", True))
                return {"status": "ok", "samples_s": measured.samples_s, "triton_launches": LaunchCounter.count - launches}
            wall = timing.loop_wall_time(calls[0], header["rounds"])
            return {"status": "ok", "wall_s": wall, "triton_launches": LaunchCounter.count - launches}
        except BaseException as exc:  # noqa: BLE001
            return _describe_exception(exc, submission)


def serve(args: argparse.Namespace) -> int:
    req_fd, rep_fd = args.req_fd, args.rep_fd
    for fd in (req_fd, rep_fd):
        os.set_inheritable(fd, False)
    LaunchCounter.install()
    try:
        fn = load_function(Path(args.submission), args.module, args.function)
    except BaseException as exc:  # noqa: BLE001
        reply = _describe_exception(exc, Path(args.submission))
        reply["status"] = "import_error"
        protocol.send(rep_fd, reply)
        return 0
    protocol.send(rep_fd, {"status": "ready"})
    timer: Timer | None = None
    while True:
        try:
            header, blob = protocol.recv(req_fd)
        except protocol.PeerGone:
            return 0
        if header.get("op") == "exit":
            return 0
        if header.get("op") in ("time", "loop"):
            timer = timer or Timer(args.problem, fn)
            reply, out = timer.handle(header, Path(args.submission)), b""
        else:
            reply, out = handle_call(args.problem, fn, header, blob, args.device, Path(args.submission))
        protocol.send(rep_fd, reply, out)
        if reply.get("fatal"):
            return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader-worker")
    parser.add_argument("--submission", required=True)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--module", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--rep-fd", type=int, required=True)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
