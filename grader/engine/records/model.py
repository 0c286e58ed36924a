"""The versioned result record (result.json) and its parts, as pydantic models.

Everything downstream (the HTML report, Gradescope's results.json, the gradebook, the
leaderboard) is rendered from this record alone, so it carries every number a reader may want.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from grader.engine.records.text import MAX_OUTPUT, MAX_TEXT, safe_value

#: 2: the kernel check's verdict and an error's kind are fields (version 1 records still read: `_upgrade`)
SCHEMA_VERSION = 2
#: the name version 1 gave the test row that carried a failed kernel check, and its error prefix
_V1_KERNEL_CHECK = ": kernel check"
_V1_INFRA = "infrastructure: "

ErrorKind = Literal["submission", "infrastructure"]

TestStatus = Literal["passed", "failed", "error", "skipped"]
ProblemStatus = Literal["passed", "partial", "failed", "error", "skipped"]
Contention = Literal["time_limit", "out_of_memory"]


class Record(BaseModel):
    # validate_assignment: a field set after construction (the batch sets submission.path) is
    # made safe as well
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        """Text from a submission: lone surrogates escaped, control characters gone, length bounded."""
        return safe_value(value, MAX_OUTPUT if info.field_name == "output" else MAX_TEXT)


class TestResult(Record):
    __test__ = False  # not a pytest test class, despite the name

    name: str
    status: TestStatus
    score: float
    max_score: float
    message: str = ""
    visibility: Literal["public", "hidden"] = "public"
    case: str = ""
    duration_s: float = 0.0
    #: the case only compiled the kernels for the GPU and checked no values (`Case.compile_only`):
    #: its points follow the problem's value-checked cases, and every report labels it
    compile_only: bool = False


class GpuState(Record):
    """What NVML said about the GPU around one shape's timed windows (grader/engine/orchestrator/gpu_state.py).

    Appeals are settled from these: a ratio measured while the GPU throttled is marked, never
    silently scored.
    """

    sm_clock_mhz: list[int] = Field(default_factory=list)  # lowest and highest seen
    memory_clock_mhz: list[int] = Field(default_factory=list)
    temperature_c: int | None = None  # highest seen
    power_w: float | None = None  # highest seen
    #: every throttle reason NVML reported at a window's edges (benign ones included, e.g. sw_power_cap)
    throttle_reasons: list[str] = Field(default_factory=list)
    #: windows timed again because a slowdown (thermal, power brake, hardware) was set around them
    retimed_windows: int = 0
    #: a slowdown was still set after the re-timings: this shape's ratio is marked in the report
    throttled: bool = False


class ShapeTiming(Record):
    """One benchmark shape: the student's and the reference's times, measured in the same run."""

    name: str
    case: str
    student_ms: float | None = None
    student_spread_ms: float | None = None
    reference_ms: float | None = None
    reference_spread_ms: float | None = None
    pytorch_ms: float | None = None
    ratio: float | None = None
    achieved: float | None = None
    achieved_unit: str = ""
    rounds: int = 0
    #: rounds whose outputs were checked against the float64 definition while timed
    verified_rounds: int = 0
    flags: list[str] = Field(default_factory=list)
    #: the ratio's 95% confidence interval, from the spread of the alternations' ratios
    ratio_low: float | None = None
    ratio_high: float | None = None
    #: alternations of student and reference windows timed, and why timing stopped there
    #: (grader/engine/judge/stopping.py: "settled", "precise", "capped", "most")
    alternations: int = 0
    stopped: str = ""
    gpu_state: GpuState | None = None
    #: the most the student's calls allocated at this shape beyond their inputs (GiB), measured in
    #: the worker, and the shape's budget in the spec: peak_gib <= budget_gib whenever it was timed
    peak_gib: float | None = None
    budget_gib: float | None = None


def geomean(values: list[float]) -> float:
    """The geometric mean: `Performance.ratio_geomean` over a problem's shapes, and every overall
    speedup over a result's problems (Gradescope's leaderboard, the course's); nan for none."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


class Performance(Record):
    status: Literal["measured", "not_measured", "flagged", "skipped"]
    reason: str = ""
    score: float | None = None
    max_score: float
    ratio_geomean: float | None = None
    gpu: str | None = None
    shapes: list[ShapeTiming] = Field(default_factory=list)
    #: set when a shape's speed ratio is above the spec's review bound: points stand, a person looks
    review: str | None = None
    #: the points the ratios' confidence intervals allow (score lies between them)
    score_low: float | None = None
    score_high: float | None = None


class KernelTime(Record):
    """One GPU kernel's share of a profiled call (every launch of that name, summed)."""

    name: str = Field(max_length=200)
    calls: int
    time_ms: float


class KernelCounters(Record):
    """One kernel's Nsight Compute counters over the profiled call (every launch of that name)."""

    name: str = Field(max_length=200)
    launches: int
    time_ms: float
    #: percentages of the GPU's peak (ncu's "Speed Of Light"), time-weighted over launches
    sm_pct: float | None = None
    memory_pct: float | None = None
    dram_gb_s: float | None = None
    occupancy_pct: float | None = None
    registers: int | None = None


class ShapeProfile(Record):
    """One warm call of a benchmark shape under the PyTorch profiler: the `profile` mode's report."""

    name: str
    case: str = ""
    #: the call on the host clock, synchronised; its kernels' GPU time summed
    wall_ms: float = 0.0
    kernels_ms: float = 0.0
    kernels: list[KernelTime] = Field(default_factory=list, max_length=20)
    #: why there is no breakdown (the worker's error), if so
    error: str = ""
    #: Nsight Compute's counters for the same call, where `ncu` ran; else why not
    counters: list[KernelCounters] = Field(default_factory=list, max_length=20)
    counters_note: str = ""


class Phases(Record):
    """Where one problem's grading spent its wall time: `grader batch` sums them over the class."""

    worker_start_s: float = 0.0
    correctness_s: float = 0.0
    #: the benchmark shapes' first calls (compiling at those shapes), beside other gradings, before timing
    warm_s: float = 0.0
    timing_s: float = 0.0
    #: the timed rounds' sampled outputs checked, after timing, beside other gradings
    checks_s: float = 0.0
    #: waiting for the GPU's lease (another grading's timed window, or its calls before ours)
    gpu_wait_s: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _read_older(cls, data: Any) -> Any:
        """Phases written by an older grader still read: `compile_aside_s` (compiles made aside, an
        option removed as measured slower: docs/performance.md) is dropped."""
        if isinstance(data, dict) and "compile_aside_s" in data:
            data = {k: v for k, v in data.items() if k != "compile_aside_s"}
        return data


class Finding(Record):
    """A static-scan finding: evidence for a human, never a verdict on its own."""

    file: str
    line: int
    rule: str
    message: str


class ProblemResult(Record):
    name: str
    title: str = ""
    #: where the write-up explains this problem (the spec's writeup_section): failures link to it
    writeup_section: str = ""
    score: float
    max_score: float
    status: ProblemStatus
    message: str = ""
    tests: list[TestResult] = Field(default_factory=list)
    performance: Performance | None = None
    findings: list[Finding] = Field(default_factory=list)
    output: str = ""
    duration_s: float = 0.0
    #: why the kernel rule failed (PyTorch computed it, no Triton kernel ran): the problem earns
    #: nothing; None when the rule held or no call was watched. Set once, by the orchestrator.
    kernel_check: str | None = None
    phases: Phases | None = None
    #: `--profile`: per public benchmark shape, where one warm call's GPU time went
    profile: list[ShapeProfile] = Field(default_factory=list)
    #: what the problem ran out of while its grading shared the GPU with others, and may not have
    #: alone: its time limit once every correctness case had passed (compiles slowed by theirs), or
    #: GPU memory (theirs held beside it). A batch that graded it beside others grades it again
    #: alone (grader/course/batch/run.py); None when neither happened
    contended: Contention | None = None
    #: why part of this problem could not be graded on this machine (the grader's own failure, twice,
    #: or a memory budget the card could not give): never a zero, an error row to grade again
    ungradable: str | None = None
    #: GPU work a watched call ran that was launched outside every Triton launch and PyTorch op
    #: (grader/engine/harness/device_activity.py): a note for staff (a "review" flag), not a verdict
    device_review: str | None = None


class SpecFingerprint(Record):
    """Hashes of the spec a result was graded with (hidden cases included), in two halves.

    `grading`: what decides a case's verdict (cases, tolerances, the kernel rule, time limits,
    benchmark shapes): when it changes, the submission must be graded again. `scoring`: what
    turns verdicts into points (points, case weights, thresholds): when only it changes, the
    stored per-case results are re-scored and no kernel runs (grader/engine/judge/fingerprint.py).
    """

    grading: str
    scoring: str


class AssignmentRef(Record):
    name: str
    version: str
    spec: SpecFingerprint | None = None


class SubmissionRef(Record):
    path: str
    sha256: str
    student: str | None = None
    files: list[str] = Field(default_factory=list)


class RunEnvironment(Record):
    device: str
    torch: str
    triton: str
    python: str
    platform: str = ""
    isolation: str = ""
    interpreter: bool = False


FlagKind = Literal["kernel check failed", "timing flagged", "review", "scan findings"]
#: flags that keep a result off the public ranking (points are not earned fairly)
BLOCKING: frozenset[str] = frozenset({"kernel check failed", "timing flagged"})


class Flag(Record):
    """One thing for a person to look at: its kind, the problem it concerns, and why (staff eyes)."""

    kind: FlagKind
    problem: str
    detail: str

    @property
    def label(self) -> str:
        """The short form shown in a gradebook cell: '<problem>: kernel check failed'."""
        return f"{self.problem}: {self.kind}"

    @property
    def blocking(self) -> bool:
        return self.kind in BLOCKING


class Result(Record):
    schema_version: int = SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _read_older(cls, data: Any) -> Any:
        """Results written by an older grader still read, in today's fields."""
        return _upgrade(data)

    assignment: AssignmentRef
    submission: SubmissionRef
    environment: RunEnvironment
    score: float
    max_score: float
    pending_score: float = 0.0
    duration_s: float
    graded_at: str
    status: Literal["graded", "error"] = "graded"
    error: str = ""
    #: whose fault an error is: the submission's (a bad archive: kept) or the grading's own (a
    #: crashed runner, a lost node: graded again when the batch resumes)
    error_kind: ErrorKind | None = None
    warnings: list[str] = Field(default_factory=list)
    problems: list[ProblemResult]
    #: computed once, by whatever finished the record (grader.engine.records.flags.settle: a grading, a
    #: re-scoring); every writer and the leaderboard read them. None in a record written before
    #: they were kept: `flags.of` computes them then
    flags: list[Flag] | None = None

    def pending_note(self) -> str:
        """What a total without a GPU leaves out, said next to it wherever it is shown ("" on a GPU)."""
        if not self.pending_score:
            return ""
        return f"{round(self.pending_score, 2):g} performance points are measured on a GPU"


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version 1 record in version 2's fields: facts that v1 kept in names and message prefixes."""
    data = dict(data)
    problems = []
    for problem in data.get("problems") or []:
        if isinstance(problem, dict) and "kernel_check" not in problem:
            name = f"{problem.get('name')}{_V1_KERNEL_CHECK}"
            failed = [t for t in problem.get("tests") or [] if isinstance(t, dict) and t.get("name") == name]
            failed = [t for t in failed if t.get("status") != "passed"]
            problem = {**problem, "kernel_check": (failed[0].get("message") or "failed") if failed else None}
        problems.append(problem)
    data["problems"] = problems
    error = data.get("error") or ""
    if data.get("status") == "error" and "error_kind" not in data:
        infra = isinstance(error, str) and error.startswith(_V1_INFRA)
        data["error"] = error.removeprefix(_V1_INFRA) if infra else error
        data["error_kind"] = "infrastructure" if infra else "submission"
    data["schema_version"] = SCHEMA_VERSION
    return data


def _upgrade(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("schema_version"), int) and data["schema_version"] < 2:
        return _upgrade_v1(data)
    return data
