"""The assignment as data: pydantic models for `assignment/assignment.toml` and its hidden cases.

The spec is the single source of truth for problems, points, cases, tolerances and timing
thresholds. Problem-specific case fields (shapes, dtypes, causal flags) are validated by the
case model that each problem module declares, so a typo in a case is caught at load time with
the file and the key that was wrong, not deep inside a kernel call.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from grader import ROOT

DTYPES = ("float32", "float16", "bfloat16")
DType = Literal["float32", "float16", "bfloat16"]
Suite = Literal["gpu", "cpu"]
Visibility = Literal["public", "hidden"]

DEFAULT_SPEC = ROOT / "assignment" / "assignment.toml"
HIDDEN_NAME = "hidden_cases.toml"


class SpecError(Exception):
    """A malformed assignment file: the message names the file, the key and what was expected."""


class Strict(BaseModel):
    # no inf or nan anywhere in the spec: `time_limit_s = inf` would never stop a hung worker
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Points(Strict):
    correctness: float = Field(ge=0)
    performance: float = Field(ge=0)


class Tolerance(Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class Tier(Strict):
    ratio: float = Field(gt=0)
    fraction: float = Field(ge=0, le=1)


DEFAULT_PRECISION = 0.1
DEFAULT_WINDOW_S = 0.25


class Thresholds(Strict):
    """Turns a speed ratio (t_reference / t_student) into a fraction of the performance points.

    Linear: full credit at or above `full_at`, none at or below `zero_at`, linear in between.
    Tiers: the fraction of the highest tier whose ratio is reached (tiers override linear).
    """

    full_at: float = Field(default=1.0, gt=0)
    zero_at: float = Field(default=0.25, ge=0)
    tiers: list[Tier] = Field(default_factory=list)
    #: a shape faster than the reference by more than this is marked for review (no points change)
    review_above: float = Field(default=1.5, gt=1)
    #: points: a shape is timed until its ratio's interval spans fewer points than this, or lies
    #: wholly where the points do not change (grader/engine/judge/stopping.py)
    precision: float = Field(default=DEFAULT_PRECISION, gt=0)
    #: seconds of timed work per side in one alternation (the student's window, then the
    #: reference's): shorter windows interleave the two more finely and hold the GPU alone for
    #: less; the stopping rule adds alternations where their ratios spread (grader/engine/orchestrator/shape_timing.py)
    window_s: float = Field(default=DEFAULT_WINDOW_S, ge=0.05, le=2.0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.zero_at >= self.full_at:
            raise ValueError(f"zero_at ({self.zero_at}) must be below full_at ({self.full_at})")
        return self


class Case(Strict):
    """One correctness case. Problem modules subclass this with their own fields."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    suite: Suite = "gpu"
    seed: int = 0
    repeats: int = Field(default=2, ge=1, le=10)
    weight: float = Field(default=1.0, gt=0)
    visibility: Visibility = "public"
    #: under the interpreter, every launch is compiled for the graded GPU and none is run; only the
    #: compiler's verdict is checked. For a case whose point is a GPU compile rule (a row past
    #: Triton's block limit) at a size the interpreter would take minutes to run with small blocks.
    #: No values are checked, so it earns points only as the problem's value-checked cases do
    #: (grader/engine/judge/scoring.py); a CPU case only, since a GPU runs every launch it compiles
    compile_only: bool = False
    #: a benchmark shape's GPU memory budget: what one call of the submission may allocate at this
    #: shape beyond its inputs (outputs, workspace, what autograd saves), in GiB. The same on every
    #: card: the worker is timed under exactly this much, and a card that cannot give it leaves the
    #: shape ungradable there, never zero (grader/engine/harness/memory_budget.py). Benchmarks only.
    gpu_memory_gib: float | None = Field(default=None, gt=0, le=1024)

    @model_validator(mode="after")
    def _compile_only_on_cpu(self) -> Case:
        if self.compile_only and self.suite != "cpu":
            raise ValueError(f'case {self.name!r}: compile_only applies to CPU cases (suite = "cpu") only')
        return self

    def describe(self) -> str:
        """How the write-up names this case; a problem's case model says it in its own terms."""
        return self.name


#: dtypes as the write-up and reports abbreviate them
SHORT_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def with_layout_note(text: str, layout: str) -> str:
    """`text`, with a non-default memory layout named after it."""
    return text if layout == "contiguous" else f"{text} ({layout})"


class Problem(Strict):
    name: str = Field(pattern=r"^[a-z_]+$")
    title: str
    module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    writeup_section: str
    points: Points
    time_limit_s: float = Field(gt=0)
    tolerance: dict[str, dict[DType, Tolerance]]
    thresholds: Thresholds = Field(default_factory=Thresholds)
    cases: list[Case] = Field(default_factory=list)
    benchmarks: list[Case] = Field(default_factory=list)
    #: the assignment's kernel rule (`KernelRule`), given to each problem as the spec loads
    _rule: KernelRule | None = PrivateAttr(default=None)

    @property
    def rule(self) -> KernelRule:
        """What a watched call may dispatch besides the submission's own Triton kernels."""
        if self._rule is None:
            raise SpecError(f"problem {self.name!r} was made outside an assignment: it has no kernel rule")
        return self._rule

    @model_validator(mode="after")
    def _budgets(self) -> Problem:
        """Every benchmark shape states its GPU memory budget; a correctness case has none (its
        shapes are small, and a budget there would be a rule nobody checks)."""
        missing = [b.name for b in self.benchmarks if b.gpu_memory_gib is None]
        if missing:
            raise ValueError(
                f"benchmark {missing[0]!r} needs gpu_memory_gib (the GPU memory a submission may use there)"
            )
        stray = [c.name for c in self.cases if c.gpu_memory_gib is not None]
        if stray:
            raise ValueError(f"case {stray[0]!r} has gpu_memory_gib: only benchmark shapes have a memory budget")
        return self

    @field_validator("tolerance")
    @classmethod
    def _has_default(cls, value: dict[str, dict[str, Tolerance]]) -> dict[str, dict[str, Tolerance]]:
        if "default" not in value:
            raise ValueError("needs a [tolerance.default] table with one entry per dtype")
        missing = [d for d in DTYPES if d not in value["default"]]
        if missing:
            raise ValueError(f"tolerance.default lacks {', '.join(missing)}")
        return value

    def tolerance_for(self, output: str, dtype: str) -> Tolerance:
        return self.tolerance.get(output, {}).get(dtype) or self.tolerance["default"][dtype]  # type: ignore[index]

    def suite_cases(self, suite: str, visibility: str | None = None) -> list[Case]:
        return [c for c in self.cases if c.suite == suite and (visibility is None or c.visibility == visibility)]

    @property
    def max_score(self) -> float:
        return self.points.correctness + self.points.performance


#: the allow-list's size at most: a list that grows past it is turning back into a deny-list
MAX_ALLOWED_OPS = 40


class KernelRule(Strict):
    """What a problem's watched call (its forward) may run besides the submission's own Triton
    kernels: one allow-list, the same for every problem (docs/defenses.md, "The kernel rule").

    `allowed_ops` are PyTorch operators by their `aten::` names, in place variants by their own
    (`aten::fill_`): allocation, views, copies and casts. Anything else the call dispatches (every
    computing op, every other namespace's, an op of an allowed op's own making included) fails the
    call, naming the op; `rule` is the sentence the write-up and every such message quote.
    """

    rule: str
    allowed_ops: list[str] = Field(min_length=1, max_length=MAX_ALLOWED_OPS)

    @field_validator("allowed_ops")
    @classmethod
    def _aten_names(cls, value: list[str]) -> list[str]:
        bad = [op for op in value if not op.startswith("aten::")]
        if bad or len(set(value)) != len(value):
            raise ValueError(f"must be distinct aten:: op names (got {bad or 'a repeated name'})")
        return value


class AssignmentInfo(Strict):
    name: str
    version: str
    title: str
    writeup: str = "assignment/README.md"


class Environment(Strict):
    """What a submission is graded with: one torch and one Triton, and what it may import.

    The handout's install, both images and every GPU run use exactly `torch` and `triton`
    (tests/grader/test_environment.py checks each place); `allowed_imports` are the top-level
    packages a submission may import beside the standard library and its own modules.
    """

    python: str
    torch: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    triton: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    numpy: str
    allowed_imports: list[str]
    #: exact versions of the allowed packages beyond torch, triton and numpy
    packages: dict[str, str] = Field(default_factory=dict)

    @field_validator("python", "numpy")
    @classmethod
    def _specifier(cls, value: str) -> str:
        SpecifierSet(value)  # InvalidSpecifier is a ValueError: reported with the key
        return value

    @model_validator(mode="after")
    def _complete(self) -> Environment:
        missing = [n for n in ("torch", "triton", "numpy") if n not in self.allowed_imports]
        unpinned = [n for n in self.allowed_imports if n not in ("torch", "triton", "numpy", *self.packages)]
        stray = [n for n in self.packages if n not in self.allowed_imports]
        if missing or unpinned or stray or not all(n.isidentifier() for n in self.allowed_imports):
            raise ValueError(
                f"allowed_imports must be module names including torch, triton and numpy, with a version in "
                f"packages for each other one (missing {missing}, unpinned {unpinned}, pinned but not allowed {stray})"
            )
        return self


#: what a student can ask `grader serve` for (grader/course/service/): public cases, timing, a
#: profile, or the hidden suite whose result waits for the deadline or for staff to publish it
Mode = Literal["test", "benchmark", "profile", "final"]
MODES: tuple[Mode, ...] = ("test", "benchmark", "profile", "final")


class Quota(Strict):
    """How many submissions of one mode a student may make (None: no limit)."""

    per_hour: int | None = Field(default=None, ge=0)
    per_day: int | None = Field(default=None, ge=0)


def _default_quotas() -> dict[Mode, Quota]:
    # a GPU grading of the four problems takes about a minute warm (docs/performance.md): a class of
    # 100 at these rates keeps one H200 busy without starving the finals
    return {
        "test": Quota(per_hour=6, per_day=40),
        "benchmark": Quota(per_hour=3, per_day=20),
        "profile": Quota(per_hour=3, per_day=20),
        "final": Quota(per_hour=2, per_day=5),
    }


class Service(Strict):
    """`[service]`: what `grader serve` allows each student, and until when.

    `late` says what happens after the deadline: "refuse" takes no final submission (test,
    benchmark and profile stay open), "accept" takes them marked late, "closed" takes nothing.
    """

    deadline: datetime | None = None
    late: Literal["refuse", "accept", "closed"] = "refuse"
    quota: dict[Mode, Quota] = Field(default_factory=_default_quotas)
    #: the largest upload the service reads, in bytes (a packed submission is a few kilobytes)
    max_upload_bytes: int = Field(default=4 << 20, gt=0, le=64 << 20)

    @field_validator("deadline")
    @classmethod
    def _zoned(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("needs a time zone (e.g. 2026-06-01T23:59:00-07:00): a bare time is ambiguous")
        return value

    @field_validator("quota")
    @classmethod
    def _every_mode(cls, value: dict[Mode, Quota]) -> dict[Mode, Quota]:
        return {**_default_quotas(), **value}


class Assignment(Strict):
    assignment: AssignmentInfo
    environment: Environment
    kernel_rule: KernelRule
    problems: list[Problem]
    service: Service = Field(default_factory=Service)

    @model_validator(mode="after")
    def _give_the_rule(self) -> Assignment:
        """Every problem is judged by the assignment's one kernel rule (`Problem.rule`)."""
        for p in self.problems:
            p._rule = self.kernel_rule
        return self

    @model_validator(mode="after")
    def _unique(self) -> Assignment:
        names = [p.name for p in self.problems]
        if len(set(names)) != len(names):
            raise ValueError(f"problem names must be unique, got {names}")
        for p in self.problems:
            case_names = [c.name for c in p.cases]
            dup = {n for n in case_names if case_names.count(n) > 1}
            if dup:
                raise ValueError(f"problem {p.name!r} repeats case names {sorted(dup)}")
        return self

    def problem(self, name: str) -> Problem:
        for p in self.problems:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def max_score(self) -> float:
        return sum(p.max_score for p in self.problems)

    @property
    def has_hidden_cases(self) -> bool:
        return any(c.visibility == "hidden" for p in self.problems for c in p.cases)


def _where(loc: tuple[Any, ...], names: list[str]) -> str:
    """An error location with problems by name: problems[<name>].thresholds, not problems.0.thresholds."""
    parts = list(loc)
    if len(parts) >= 2 and parts[0] == "problems" and isinstance(parts[1], int) and parts[1] < len(names):
        parts = [f"problems[{names[parts[1]]}]", *parts[2:]]
    return ".".join(str(x) for x in parts)


def model_errors(path: Path, err: ValidationError, prefix: str = "", names: list[str] | None = None) -> str:
    """A validation error as the spec's author reads it: file, field by problem name, value."""
    lines = [f"{path}: invalid assignment spec"]
    for e in err.errors():
        loc = prefix + _where(e["loc"], names or [])
        got = e.get("input")
        got_text = "" if isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"  - {loc}: {e['msg']}{got_text}")
    return "\n".join(lines)
