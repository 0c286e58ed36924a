"""The wire between the orchestrator and the worker: framed JSON headers plus tensor blobs, and
one typed model per message that travels on it.

Tensors travel as `torch.save` bytes and are read back with `torch.load(weights_only=True)`, which
refuses arbitrary pickled objects: a hostile worker can send wrong data, but never code that runs
in the orchestrator. Every read is bounded in size and in time, and every reply is parsed into the
model its request expects before the orchestrator reads any of it (`read_reply`): a field of the
wrong type would otherwise surface as an exception deep inside the grading.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, TypeAdapter, ValidationError

from grader.engine.protocol import frames
from grader.engine.protocol.base import Message
from grader.engine.protocol.frames import MAX_DEPTH, MAX_HEADER, Deadline, PeerGone, ProtocolError, recv  # noqa: F401 (the wire's users)
from grader.engine.protocol.payloads import check_archive, pack_tensors, unpack_tensors  # noqa: F401

# -- the messages -------------------------------------------------------------------------------


class Imported(Message):
    """A worker's first word: Python, PyTorch, Triton and the harness imported; no CUDA context and
    nothing of the submission yet. It waits for a StartRequest, which the orchestrator sends once it
    holds the GPU (grader/engine/orchestrator/gpu_lease.py): the seconds of imports overlap other gradings'
    timed windows instead of holding them up."""

    status: Literal["imported"] = "imported"


class Ready(Message):
    """The submission's module imported; requests may follow."""

    status: Literal["ready"] = "ready"
    #: seconds the worker spent on each step of its start, in order (for GRADER_TRACE: where a
    #: start's time goes; nothing is judged by them)
    start_s: dict[str, float] = {}


class Failed(Message):
    """The submission raised (or tampered with the harness); `fatal`: the worker must not be reused."""

    status: Literal["error"] = "error"
    type: str
    message: str
    traceback: str = ""
    fatal: bool = False


class ImportFailed(Failed):
    """The greeting of a worker whose submission module could not be loaded."""

    status: Literal["import_error"] = "import_error"  # type: ignore[assignment]


class Unwritten(Message):
    """Why the tensor a watched call returned is not what the submission's Triton kernels stored
    in that call (`grader.engine.harness.writers`)."""

    #: not_written: no kernel of the call wrote it, or something else wrote it after one did;
    #: changed_outside: a tensor's bytes changed with no PyTorch op or Triton launch writing them;
    #: from_outside: a kernel wrote it from memory no PyTorch op made (torch.from_numpy, say)
    what: Literal["not_written", "changed_outside", "from_outside"]
    detail: str


class Profile(Message):
    """What the profiler saw during a watched call (see `grader.engine.harness.calls.profiled`)."""

    aten_ops: list[str] = []
    #: events only torch.compile'd code records (`grader.engine.harness.recording.COMPILED_EVENTS`)
    compiled_regions: list[str] = []
    gpu_kernels: list[str] = []
    triton_launches: int = 0
    #: replays of a CUDA graph (`grader.engine.harness.calls.GRAPH_LAUNCHES`): kernels no op stands for
    graph_launches: int = 0
    #: device work launched outside every Triton launch and PyTorch op (`grader.engine.harness.device_activity`)
    foreign_work: list[str] = []
    #: the writer check's finding on a correctness call (None: none, or not a correctness call)
    unwritten: Unwritten | None = None


class WatchedChunk(Profile):
    """A chunk of timed rounds run again, whole, under the profiler (`grader.engine.harness.timed_watch`):
    the ops inside its calls, and its Triton launches."""

    #: the chunk's first timed round; -1: the shape's first timed call, watched before any round
    first_round: int
    rounds: int


class GpuCompile(Message):
    """One kernel variant a call launched under the interpreter, compiled ahead of time for the
    graded GPU (`grader.engine.harness.gpu_compile`): the compiler's message, or what it reserved."""

    kernel: str
    #: the compiler's error (None: it compiled)
    error: str | None = None
    #: shared memory per program the compiled kernel needs, in bytes (None: it did not compile)
    shared_bytes: int | None = None


class Called(Message):
    """A correctness call that returned: its outputs' facts (the values travel in the blob)."""

    status: Literal["ok"] = "ok"
    #: per output its facts (`calls.describe_outputs`): data the checks judge, not typed here
    meta: dict[str, Any]
    inputs_changed: list[str]
    triton_launches: int
    profile: Profile | None = None
    call_s: float
    #: the distinct kernel variants the call launched, compiled for the GPU (under the interpreter)
    gpu_compiles: list[GpuCompile] = []


class VerifiedRound(Message):
    """One checked timed round: its outputs' facts and what could not be read of them."""

    round: int
    outputs: dict[str, Any] = {}
    issues: list[str]


class Timed(Message):
    """Event-timed rounds, and the checked rounds among them (their samples travel in the blob)."""

    status: Literal["ok"] = "ok"
    samples_s: list[float]
    triton_launches: int
    #: bytes the window's calls allocated beyond their inputs and the grader's buffers, at their peak
    peak_bytes: int | None = None
    profile: Profile | None = None
    verified: list[VerifiedRound] = []
    #: rounds run, the watched chunk's included (their indices continue the samples'); None: as many as samples
    rounds_run: int | None = None
    watched: list[WatchedChunk] = []
    #: the worker's host time by step (the first call watched, the warm-up, the rounds, the watched
    #: chunk, the samples packed): for GRADER_TRACE only, never judged
    host_s: dict[str, float] = Field(default_factory=dict, max_length=8)


class Looped(Message):
    """The worker's own wall time of a loop of calls."""

    status: Literal["ok"] = "ok"
    wall_s: float
    triton_launches: int


class Warmed(Message):
    """A benchmark shape's first calls are done (compiled; autotuned, to be tuned again when timed)."""

    status: Literal["ok"] = "ok"
    call_s: float
    #: bytes the calls allocated beyond their inputs, at their peak (None: no budget was applied)
    peak_bytes: int | None = None


class Unavailable(Message):
    """The card could not give a shape's memory budget: the machine's fact, never the submission's."""

    status: Literal["unavailable"] = "unavailable"
    message: str
    #: True: this card is too small even held alone; False: other processes held the memory
    never: bool


class CallRequest(Message):
    """Run the submission once on the inputs in the blob (a correctness call)."""

    op: Literal["call"] = "call"
    replies: ClassVar[dict[str, type[Message]]] = {"ok": Called, "error": Failed}
    case: dict[str, Any]
    profile: bool = False


class ShapeRequest(Message):
    """What both timing requests share: the benchmark shape and the seeds of its inputs."""

    case: dict[str, Any]
    seed: int
    sets: int
    #: absent only when timing is unverified (GRADER_UNVERIFIED_TIMING): rounds are not refilled
    refill_seed: int | None = None
    verify_seed: int | None = None
    #: the shape's GPU memory budget in bytes (the spec's `gpu_memory_gib`): what one call may
    #: allocate beyond its inputs, the worker capped at exactly that (`grader.engine.harness.memory_budget`)
    budget_bytes: int | None = Field(default=None, gt=0)


class TimeRequest(ShapeRequest):
    """Time the student's kernel for about `budget_s` (see `timing.measure`)."""

    op: Literal["time"] = "time"
    replies: ClassVar[dict[str, type[Message]]] = {"ok": Timed, "error": Failed, "unavailable": Unavailable}
    budget_s: float
    min_s: float = 0.0
    warm: bool = True
    profile: bool = False
    #: this window's round (counted from its first) before which a chunk is run again under the
    #: profiler, drawn from the secret; None: no chunk is watched
    watch_round: int | None = None
    #: seconds of the host's time the window may take past its warm-up (`timing.measure`)
    max_wall_s: float | None = None


class WarmRequest(ShapeRequest):
    """Run the student's calls of the shape once each, untimed, beside other gradings' calls: what
    compiles at the benchmark shape compiles here, not in the GPU's exclusive window
    (`grader.engine.harness.autotune_reset`: what autotunes here is tuned again when timed)."""

    op: Literal["warm"] = "warm"
    replies: ClassVar[dict[str, type[Message]]] = {"ok": Warmed, "error": Failed, "unavailable": Unavailable}


class LoopRequest(ShapeRequest):
    """Run `rounds` calls back to back for the orchestrator's wall-clock check."""

    op: Literal["loop"] = "loop"
    replies: ClassVar[dict[str, type[Message]]] = {"ok": Looped, "error": Failed, "unavailable": Unavailable}
    rounds: int


class KernelTime(Message):
    """One GPU kernel's share of a profiled call: every launch of that name, summed."""

    name: str
    calls: int
    time_s: float


#: kernels whose hardware counters a profile sends back (the longest)
MAX_COUNTED_KERNELS = 12


class KernelCounters(Message):
    """One kernel's Nsight Compute counters over one profiled call (`grader.engine.harness.ncu_summary`):
    every launch of that name, times and bytes summed, percentages weighted by time."""

    name: str = Field(max_length=200)
    launches: int
    time_s: float
    #: of the GPU's peak: SM throughput and memory throughput (ncu's "Speed Of Light")
    sm_pct: float | None = None
    memory_pct: float | None = None
    dram_gb_s: float | None = None
    occupancy_pct: float | None = None
    registers: int | None = None


class Profiled(Message):
    """One warm call of a benchmark shape under the profiler: where its GPU time went."""

    status: Literal["ok"] = "ok"
    kernels: list[KernelTime]
    #: the call's time on the host clock, synchronised (launches and gaps included)
    wall_s: float
    #: Nsight Compute's counters for the same call, when asked for and available
    counters: list[KernelCounters] = Field(default_factory=list, max_length=MAX_COUNTED_KERNELS)
    #: why there are no counters, when they were asked for
    counters_note: str = Field(default="", max_length=500)


class ProfileRequest(ShapeRequest):
    """Profile one warm call of the shape (`grader.engine.harness.kernel_profile`): the `profile` mode."""

    op: Literal["profile"] = "profile"
    replies: ClassVar[dict[str, type[Message]]] = {"ok": Profiled, "error": Failed, "unavailable": Unavailable}
    #: the Nsight Compute program to run the call under as well, if any (`grader.engine.harness.ncu_summary`)
    ncu: str | None = None


class ExitRequest(Message):
    op: Literal["exit"] = "exit"


class StartRequest(Message):
    """Go on from Imported: the CUDA context, the kept kernels, the watch, the submission's import."""

    op: Literal["start"] = "start"
    replies: ClassVar[dict[str, type[Message]]] = {"ready": Ready, "import_error": ImportFailed}


AnyRequest = CallRequest | TimeRequest | WarmRequest | LoopRequest | ProfileRequest | ExitRequest | StartRequest
Request = Annotated[AnyRequest, Field(discriminator="op")]
_REQUEST: TypeAdapter[Any] = TypeAdapter(Request)


#: what a worker says first, by status, and after its StartRequest (each request lists its own replies)
FIRST: dict[str, type[Message]] = {"imported": Imported}
GREETING = StartRequest.replies


def _explain(exc: ValidationError) -> str:
    """The first few problems pydantic found, as `field: what is wrong` (values are not echoed)."""
    parts = [
        f"{'.'.join(map(str, e['loc'])) or 'the message'}: {e['msg']}"
        for e in exc.errors(include_url=False, include_input=False)[:3]
    ]
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_reply(header: dict[str, Any], expected: dict[str, type[Message]]) -> Message:
    """The reply as the model its status names, among those `expected`; else a ProtocolError."""
    status = header.get("status")
    if not isinstance(status, str):
        raise ProtocolError("the message has no status")
    model = expected.get(status)
    if model is None:
        raise ProtocolError(f"a reply of status {status[:40]!r} where {' or '.join(map(repr, expected))} was due")
    try:
        return model.model_validate(header)
    except ValidationError as exc:
        raise ProtocolError(f"malformed {status!r} reply: {_explain(exc)}") from None


def parse_request(header: dict[str, Any]) -> AnyRequest:
    try:
        return _REQUEST.validate_python(header)  # type: ignore[no-any-return]
    except ValidationError as exc:
        raise ProtocolError(f"malformed request: {_explain(exc)}") from None


# -- frames -------------------------------------------------------------------------------------


def send(fd: int, message: Message, blob: bytes = b"") -> None:
    """One frame (grader/engine/protocol/frames.py): the message's fields, None ones left out, then the blob."""
    frames.write(fd, message.model_dump(exclude_none=True), blob)


def read_reply(fd: int, deadline: float, max_blob: int, expected: dict[str, type[Message]]) -> tuple[Message, bytes]:
    """One reply of the worker, checked whole: its frame, its payload's archive, its model.

    The one boundary: whatever goes wrong reading what a worker sent is a ProtocolError (which
    costs that problem), never an exception that stops the orchestrator. Pipe timeouts and a
    worker gone keep their own types: the sandbox tells those apart.
    """
    header, blob = recv(fd, deadline, max_blob)
    try:
        check_archive(blob)
        return parse_reply(header, expected), blob
    except (ProtocolError, MemoryError):
        raise  # a MemoryError here is the orchestrator's (the header and payload are bounded)
    except Exception as exc:  # noqa: BLE001 - data from hostile code: any failure is the reply's fault
        raise ProtocolError(f"the reply could not be read: {type(exc).__name__}: {str(exc)[:200]}") from None
