"""The untrusted side of grading: imports one submission module and runs the calls it is sent.

This process is started by `grader.engine.sandbox` (spawned, never forked from the orchestrator), with
no secret in its environment, under resource limits and, when the grader runs as root, as a
transient unprivileged user in a mount namespace that hides the reference, the hidden cases and
the results. Everything it sends back is data for the orchestrator to check.

The submission runs in this very process, so every note it sends (exact output types, aliasing,
profiled ops, launch counts) could in principle be forged by code that reaches into the harness
(this module, `grader.engine.harness.calls` which makes each call, `grader.engine.harness.watch`
which watches it). What is done makes that take deliberate effort, and makes the easy routes fail loudly:

- the grader's modules are removed from `sys.modules` before the submission is imported, and
  nothing in `__main__` refers to them: `import grader.engine.harness.serve` fails, and a fresh copy imported
  through a hand-made path is not the copy that is running;
- ops are recorded with the C-level profiler functions, bound before the submission is
  imported, on every thread; a call that switched the profiler off or restarted it is reported as tampering;
- the functions the harness and the timing depend on (builtins, time, torch.Tensor, CUDA events,
  torch.allclose, the profiler, Triton's launch entry point, ...) are snapshotted before the
  import; any replacement is restored at once and the problem fails with the names replaced;
- the Triton launch counter lives in a closure whose globals hold nothing of the grader.

What remains (walking frames or the garbage collector to reach the harness's globals, poking
memory through ctypes, forging replies on the pipe) is listed in docs/defenses.md: the output
values for fresh inputs still have to be computed, which the static scan reports for a human.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import torch

from grader.engine import kernel_cache, protocol, timing
from grader.engine.harness import (
    autotune_reset,
    calls,
    imports,
    kernel_profile,
    l2_persisting,
    memory_budget,
    memory_share,
    ncu_summary,
    start_steps,
    student_runtime,
    timed_rounds,
    timed_watch,
    tracebacks,
)
from grader.engine.harness.watch import GUARD, LaunchCounter, arm
from grader.engine.loading import load_function
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import generator
from grader.engine.spec import gpu_limits, versions

MAX_MESSAGE = 4000


# -- errors -------------------------------------------------------------------------------------


def _trim(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE // 2] + "\n[...]\n" + text[-MAX_MESSAGE // 2 :]


def describe_exception(exc: BaseException, submission: Path) -> protocol.Failed:
    """The error as a student should see it: their own frames only, paths relative to the submission."""
    try:
        root = str(submission) + os.sep
        frames = tracebacks.student_frames(exc, submission)
        # the frames alone: the error's own line is the summary, which every report prints first
        tb = "".join(traceback.format_list(frames[-10:])).replace(root, "")
        kind = type(exc).__name__
        if isinstance(exc, SystemExit):
            summary = f"the submission called sys.exit({exc.code!r})"
        elif isinstance(exc, KeyboardInterrupt):
            summary = "the submission raised KeyboardInterrupt"
        elif isinstance(exc, MemoryError):
            limit = resource.getrlimit(resource.RLIMIT_AS)[0]
            shown = f"{limit / (1 << 30):g} GiB" if limit != resource.RLIM_INFINITY else "the machine's memory"
            summary = f"MemoryError: out of memory (a worker may use at most {shown} of address space)"
        elif isinstance(exc, torch.OutOfMemoryError):
            said = BUDGET[0].describe() if BUDGET else memory_share.describe()
            summary = f"{kind}: {exc}".replace(root, "") + f"\n{said}"
        else:
            own = tracebacks.what_to_show(exc)
            summary = f"{type(own).__name__}: {own}".replace(root, "")
            # an error only a Triton other than the grading one raises; a GPU rule the interpreter also checks
            note = versions.hint(summary) or gpu_limits.hint(summary)
            note = note if note is None or note.startswith("Triton") else f"hint: {note}"
            summary += f"\n{note}" if note else ""
        return protocol.Failed(
            type=kind, message=_trim(summary), traceback=_trim(tb), fatal=tracebacks.ends_the_worker(exc)
        )
    except BaseException:  # noqa: BLE001 - an exception whose str() or repr() itself fails
        return protocol.Failed(
            type="Exception", message="the submission raised an exception whose message could not be read"
        )


# -- calls --------------------------------------------------------------------------------------


FRESH = calls.FreshInputs()
BUDGET: list[memory_budget.Budget] = []  # the shape's, while its request runs: what out of memory says


def handle_call(
    problem_name: str, fn: Callable[..., Any], request: protocol.CallRequest, blob: bytes, device: str, submission: Path
) -> tuple[protocol.Message, bytes]:
    problem = REGISTRY[problem_name]
    case = problem.case_model.model_validate(request.case)
    outcome = calls.run(
        problem, fn, case, protocol.unpack_tensors(blob, map_location=device), device, FRESH, request.profile
    )
    tampering = GUARD.report()
    if tampering:
        return tampering, b""
    try:
        if outcome.error is not None:
            raise outcome.error
        assert outcome.result is not None
        meta, payload = calls.describe_outputs(outcome.result, outcome.inputs, outcome.snapshots)
    except BaseException as exc:  # noqa: BLE001
        return describe_exception(exc, submission), b""
    reply = protocol.Called(
        meta=meta,
        inputs_changed=outcome.changed_inputs(),
        triton_launches=outcome.triton_launches,
        profile=protocol.Profile(**outcome.profile) if outcome.profile else None,
        call_s=round(outcome.seconds, 4),
        gpu_compiles=outcome.gpu_compiles,
    )
    return reply, protocol.pack_tensors(payload)


class Timer:
    """The worker's half of timing: the student's kernel on inputs it draws itself on the GPU.

    Benchmark inputs need no secrecy in their shape, so they are made here rather than shipped
    through the pipe; every timed round then gets new contents from the orchestrator's seeds, and
    a sample of rounds has a sample of its outputs sent back to be checked (`timed_rounds`).
    """

    def __init__(self, problem_name: str, fn: Callable[..., Any], module: str = "", function: str = "") -> None:
        self.kind = REGISTRY[problem_name]
        self.fn = fn
        # what a child process under Nsight Compute imports again (`ncu_summary`)
        self.problem, self.module, self.function = problem_name, module, function
        self.key: tuple[Any, ...] | None = None
        self.sets: list[dict[str, Any]] = []
        self.calls: list[Callable[[], Any]] = []
        #: the same calls, each inside the profiler range a watched chunk looks in
        self.watch_calls: list[Callable[[], Any]] = []
        #: None only when the orchestrator sends no round seeds (GRADER_UNVERIFIED_TIMING)
        self.rounds: timed_rounds.FreshRounds | None = None
        #: the last window's median round (s): a slow kernel's next pilot is sized by it
        self.round_s: float | None = None

    def _forget(self) -> None:
        """Drop the shape's input sets (and their GPU memory: a stopped worker waiting for its timing
        window holds none of a benchmark shape's gigabytes)."""
        self.sets, self.calls, self.watch_calls, self.rounds, self.key = [], [], [], None, None
        self.round_s = None
        torch.cuda.empty_cache()

    def _prepare(self, request: protocol.ShapeRequest) -> Any:
        case = self.kind.case_model.model_validate(request.case)
        key = (request.case["name"], request.seed, request.sets, request.refill_seed, request.verify_seed)
        if key != self.key:
            self._forget()
            self.sets = [self.kind.make_inputs(case, generator(request.seed + i, "cuda")) for i in range(request.sets)]
            self.calls = [self.kind.timed(self.fn, inputs) for inputs in self.sets]
            watched_fn = timed_watch.ranged(self.fn)
            self.watch_calls = [self.kind.timed(watched_fn, inputs) for inputs in self.sets]
            if request.refill_seed is not None and request.verify_seed is not None:
                self.rounds = timed_rounds.FreshRounds(
                    self.kind, case, self.sets, request.refill_seed, request.verify_seed
                )
            self.key = key
        return case

    def _time(self, request: protocol.TimeRequest, case: Any) -> tuple[protocol.Timed, bytes]:
        """One timed window: rounds until the budget, a watched chunk, a sample of outputs packed."""
        profile: dict[str, Any] = {}
        started = time.perf_counter()
        if request.profile:
            # watched as correctness is: the same ops in the same part of the call (for some
            # problems: the forward only)
            profile = calls.watched(self.kind, self.fn, self.sets[0], case, "cuda")[1]
        launches = LaunchCounter.total()
        l2_persisting.reset()  # what earlier rounds pinned in L2 is flushed like the rest
        watch = timed_watch.ChunkProfiler(self.watch_calls, request.watch_round, self.rounds)
        measuring = time.perf_counter()
        measured = timing.measure(
            self.calls,
            request.budget_s,
            warm=request.warm,
            min_s=request.min_s,
            hooks=self.rounds,
            expect_s=self.round_s,
            watch=watch,
            max_wall_s=request.max_wall_s,
        )
        if measured.samples_s:
            self.round_s = measured.median_ms / 1e3
        packing = time.perf_counter()
        verified, payload = self.rounds.drain() if self.rounds else ([], {})
        blob = protocol.pack_tensors(payload)
        host_s = {
            "the first call, watched": measuring - started,
            "warm-up": measured.warm_s,
            "rounds": packing - measuring - measured.warm_s - watch.spent_s,
            "the watched chunk": watch.spent_s,
            "samples packed": time.perf_counter() - packing,
        }
        reply = protocol.Timed(
            samples_s=measured.samples_s,
            triton_launches=LaunchCounter.total() - launches,
            profile=protocol.Profile(**profile) if profile else None,
            verified=verified,
            rounds_run=measured.rounds_run,
            watched=watch.watched,
            host_s={k: round(v, 4) for k, v in host_s.items()},
        )
        return reply, blob

    def _warm(self, budget: memory_budget.Budget | None) -> protocol.Warmed:
        """Each input set's call once, untimed (compiles and autotuning done beside other gradings);
        the shape's inputs are dropped after, whatever the calls did."""
        started = time.perf_counter()
        calls_made = len(self.calls)
        try:
            with autotune_reset.tuned_again_when_timed():
                for call in self.calls:
                    call()
                torch.cuda.synchronize()
            peak = budget.peak() if budget else None
        finally:
            self._forget()
        return protocol.Warmed(call_s=(time.perf_counter() - started) / max(calls_made, 1), peak_bytes=peak)

    def handle(
        self,
        request: protocol.TimeRequest | protocol.WarmRequest | protocol.LoopRequest | protocol.ProfileRequest,
        submission: Path,
    ) -> tuple[protocol.Message, bytes]:
        calls.nan_fill(False)  # timing runs without the NaN fill of correctness calls
        blob = b""
        reply: protocol.Message
        budget = None
        try:
            try:
                case = self._prepare(request)
                budget = memory_budget.applied(request.budget_bytes, str(request.case.get("name", "")), BUDGET)
                launches = LaunchCounter.total()
                if isinstance(request, protocol.TimeRequest):
                    reply, blob = self._time(request, case)
                    peak = max(budget.peak() - timing.L2Flusher.size(), 0) if budget else None
                    reply = reply.model_copy(update={"peak_bytes": peak})
                elif isinstance(request, protocol.WarmRequest):
                    reply = self._warm(budget)
                elif isinstance(request, protocol.ProfileRequest):
                    reply = kernel_profile.profile_call(self.calls)
                    if request.ncu:
                        counters, note = ncu_summary.summarize(
                            request.ncu, submission, self.problem, self.module, self.function, request
                        )
                        reply = reply.model_copy(update={"counters": counters, "counters_note": note})
                else:
                    wall = timing.loop_wall_time(self.calls[0], request.rounds)
                    reply = protocol.Looped(wall_s=wall, triton_launches=LaunchCounter.total() - launches)
            finally:
                GUARD.restore()
        except memory_budget.BudgetUnavailable as exc:
            self._forget()  # nothing of the submission ran: the worker is fit for the request again
            reply, blob = protocol.Unavailable(message=str(exc), never=exc.never), b""
        except BaseException as exc:  # noqa: BLE001
            reply, blob = describe_exception(exc, submission), b""
            if isinstance(exc, torch.OutOfMemoryError):
                # the shape's sets and cached blocks let go of: the worker is fit for the same
                # request again, with the GPU held alone (grader/engine/orchestrator/timed_shapes.py)
                self._forget()
                reply = reply.model_copy(update={"fatal": False})
        finally:
            BUDGET.clear()
        tampering = GUARD.report()
        return (tampering, b"") if tampering else (reply, blob)


# -- the loop -----------------------------------------------------------------------------------


def _forget_grader() -> None:
    """Drop the grader's modules from sys.modules: the submission cannot import the running copy."""
    for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
        del sys.modules[name]


def serve(args: argparse.Namespace) -> int:
    steps = start_steps.Steps()
    steps.done("Python, PyTorch, Triton and the harness imported")
    req_fd, rep_fd = args.req_fd, args.rep_fd
    # started before its grading holds the GPU: nothing below (CUDA, the submission) runs until it does
    if not start_steps.go_ahead(req_fd, rep_fd):
        return 0  # an exit request (the grading ended first)
    steps.done("waiting for the GPU")
    if args.device == "cuda":
        memory_budget.expandable_segments()  # before CUDA's first allocation
    if args.device == "cuda" and args.gpu_memory_fraction:
        try:
            torch.cuda.set_per_process_memory_fraction(args.gpu_memory_fraction)
        except (RuntimeError, ValueError):  # pragma: no cover - no GPU after all: the calls will say so
            pass
        steps.done("CUDA context")
    seed, cache = os.environ.get("GRADER_KERNEL_SEED"), os.environ.get("TRITON_CACHE_DIR")
    if seed and cache:
        try:  # this submission's kernels from an earlier grading: compiled ones are not compiled again
            kernel_cache.restore_into(Path(seed), Path(cache))
        except OSError:
            pass
        steps.done("kept kernels restored")
    student_runtime.prepare()  # the same process settings as pytest handout's
    imports.install(Path(args.submission), versions.graded().allowed_imports)  # refuses what the handout refuses
    arm()  # before the submission is imported
    _forget_grader()
    steps.done("the watch armed")
    try:
        fn = load_function(Path(args.submission), args.module, args.function)
    except BaseException as exc:  # noqa: BLE001
        GUARD.restore()
        failed = describe_exception(exc, Path(args.submission))
        protocol.send(rep_fd, protocol.ImportFailed(**failed.model_dump(exclude={"status"})))
        return 0
    GUARD.restore()  # replacements made at import fail every call (the list is kept)
    steps.done("the submission imported")
    protocol.send(rep_fd, protocol.Ready(start_s=steps.taken))
    timer: Timer | None = None
    while True:
        try:
            header, blob = protocol.recv(req_fd)
        except protocol.PeerGone:
            return 0
        request = protocol.parse_request(header)
        reply: protocol.Message
        if isinstance(request, protocol.ExitRequest):
            return 0
        if isinstance(request, protocol.CallRequest):
            reply, out = handle_call(args.problem, fn, request, blob, args.device, Path(args.submission))
            memory_budget.release_cached()  # before the reply: the grader stops the worker once it has it
        else:
            timer = timer or Timer(args.problem, fn, args.module, args.function)
            reply, out = timer.handle(request, Path(args.submission))
        protocol.send(rep_fd, reply, out)
        if isinstance(reply, protocol.Failed) and reply.fatal:
            return 3


#: bound at load, as rule 3 asks: how the worker leaves, and the streams it flushes on the way
_EXIT, _STREAMS = os._exit, (sys.stdout, sys.stderr)


def _leave(code: int) -> NoReturn:
    """End the process without Python's finalization, which takes a second or more once PyTorch is
    loaded (the grading waited for it, four times a submission, the GPU held alone while timing);
    what was printed is flushed first, and the submission's atexit hooks never run."""
    for stream in (*_STREAMS, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a replaced stream that fails: the rest still go out
            pass
    _EXIT(code)


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="grader-worker")
    parser.add_argument("--submission", required=True)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--module", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--rep-fd", type=int, required=True)
    parser.add_argument("--gpu-memory-fraction", type=float, default=None)
    _leave(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
