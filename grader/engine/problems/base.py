"""What every problem provides: how to make inputs, the float64 definition, and how to call a kernel.

A problem's folder (grader/engine/problems/<name>/) is the only place that knows its argument list and
outputs. The orchestrator uses `make_inputs` and `expected`; the worker (and the handout tests,
in-process) use `call`. Keeping these side by side is what lets a new problem be added in one folder.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from grader.engine.problems.meta import on_meta
from grader.engine.spec.model import Case

Watch = Callable[[], AbstractContextManager[Any]]

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def case_seed(secret: str, problem: str, case: Case, repeat: int) -> int:
    """A 63-bit seed from the secret, the case and the repeat: unpredictable without the secret."""
    text = f"{secret}\x00{problem}\x00{case.name}\x00{case.seed}\x00{repeat}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def generator(seed: int, device: str = "cpu") -> torch.Generator:
    """Inputs are drawn on `device` (CPU for correctness; the GPU for large benchmark inputs)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def with_layout(t: torch.Tensor, layout: str, gen: torch.Generator) -> torch.Tensor:
    """Return a tensor equal to `t` whose memory layout is `layout` (values unchanged).

    - contiguous: as is
    - transposed: the last two dims swapped in memory (a column-major view)
    - strided: a view into a larger buffer, every other element along the last dim
    - offset: a view that starts partway into its storage (catches kernels that ignore offsets)
    """
    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed":
        if t.dim() < 2:
            return t.contiguous()
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "strided":
        big = torch.randn(*t.shape[:-1], t.shape[-1] * 2, generator=gen, device=gen.device).to(t.dtype)
        view = big[..., ::2]
        view.copy_(t)
        return view
    if layout == "offset":
        flat = torch.randn(t.numel() + 7, generator=gen, device=gen.device).to(t.dtype)
        view = flat[7:].view(t.shape)
        view.copy_(t)
        return view
    raise ValueError(f"unknown layout {layout!r}")


def move(t: torch.Tensor, device: str) -> torch.Tensor:
    """Copy `t` to `device` keeping its exact strides and storage offset (`.to` may not)."""
    if t.device.type == device:
        return t
    storage = t.untyped_storage()
    moved = torch.empty(storage.nbytes() // t.element_size(), dtype=t.dtype, device=device)
    moved.view(torch.uint8).copy_(torch.empty(0, dtype=torch.uint8).set_(storage))
    return moved.as_strided(t.shape, t.stride(), t.storage_offset())


def move_inputs(inputs: dict[str, Any], device: str) -> dict[str, Any]:
    return {k: move(v, device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


#: case fields that are flags: a message names them only when they are set
_FLAGS = frozenset({"compile_only", "gpu_memory_gib"})


def describe_tensor(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} strides={tuple(t.stride())}"


MASK64 = (1 << 64) - 1


def round_seed(base: int, index: int) -> int:
    """A 63-bit seed for timed round `index` from a per-shape `base` (splitmix64: cheap, well mixed).

    Timed rounds get new input contents and a new output sample each; the orchestrator draws the
    bases from the secret and recomputes any round's seed to check it.
    """
    z = (base + (index + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return (z ^ (z >> 31)) >> 1


#: a round other than a chunk's last is checked with probability 1 / VERIFY_EVERY
VERIFY_EVERY = 32
_CHOICE_SALT = 0x5BD1E995


def chosen(verify_base: int, index: int) -> bool:
    """Whether timed round `index` must be checked (besides the last round of every chunk)."""
    return round_seed(verify_base ^ _CHOICE_SALT, index) % VERIFY_EVERY == 0


def pick(gen: torch.Generator, high: int, count: int) -> torch.Tensor:
    """`count` indices below `high` drawn on the generator's device, without a host round trip.

    Drawn with replacement: a timed round may not wait for the CPU, and the orchestrator redraws
    the same indices from the same seed on the same device.
    """
    return torch.randint(0, high, (min(count, high),), generator=gen, device=gen.device)


def type_name(value: Any) -> str:
    kind = type(value)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind.__name__)}"[:200]


def output_facts(value: Any) -> dict[str, Any]:
    """What the output contract is judged on, read on the host without a sync: exact type, and for
    an exact `torch.Tensor` its layout, device, dtype and shape (a subclass's methods are the
    student's code and are not called). Correctness and timed calls send the same facts."""
    info: dict[str, Any] = {"type": type_name(value), "exact": type(value) is torch.Tensor}
    if info["exact"]:
        info.update(
            layout=str(value.layout).removeprefix("torch."),
            device=value.device.type,
            dtype=str(value.dtype).removeprefix("torch."),
            shape=list(value.shape),
        )
    return info


#: the elements of one output a sampled timed round sends back, about (rows x columns)
SAMPLE_ROWS = 16
SAMPLE_COLUMNS = 4096


@dataclass
class CallOutput:
    """What one call of a student function produced, before any check.

    `outputs` are the tensors to compare (name -> tensor, on the call's device); `notes` holds
    facts the checker needs about the returned objects that copying would erase (its exact type).
    """

    outputs: dict[str, Any]
    notes: dict[str, str] = field(default_factory=dict)


class ProblemKind:
    """Base class of every problem. Subclasses set `name` (the spec's), `case_model`, `output_names`."""

    name: ClassVar[str]
    case_model: ClassVar[type[Case]]
    output_names: ClassVar[tuple[str, ...]]
    #: the dtype a case's outputs should have, per output name ("input" = the case's dtype)
    output_dtypes: ClassVar[dict[str, str]] = {}
    #: the kernel multiplies with tl.dot, which Triton's interpreter gets wrong on bfloat16 operands
    #: (it multiplies the raw bit patterns): such a problem has no bfloat16 CPU case
    uses_dot: ClassVar[bool] = False

    def make_inputs(self, case: Case, gen: torch.Generator) -> dict[str, Any]:
        """Fresh inputs on the CPU for one call (tensors and plain keyword values)."""
        raise NotImplementedError

    def expected(self, inputs: dict[str, Any], case: Case) -> dict[str, torch.Tensor]:
        """The float64 definition applied to the inputs: what the outputs must match."""
        raise NotImplementedError

    def meta_inputs(self, case: Case) -> dict[str, Any]:
        """Inputs of `case`'s shapes, dtypes and strides on the meta device (no data): what a
        memory estimate runs on. `make_inputs` itself, its tensors made on meta (grader.engine.problems.meta)."""
        return on_meta(self.make_inputs, case, generator(0))

    def call(
        self, fn: Callable[..., Any], inputs: dict[str, Any], case: Case, watch: Watch = nullcontext
    ) -> CallOutput:
        """Run the student's function on inputs already on the target device.

        `watch()` wraps the part of the call the kernel rule judges (its allow-list of PyTorch ops).
        """
        raise NotImplementedError

    def describe(self, case: Case) -> str:
        """A one-line description of a case for messages: shape, dtype, layout, flags."""
        fields = case.model_dump(exclude={"name", "suite", "seed", "repeats", "weight", "visibility"})
        # flags said only where they are set: a compile-only case, a memory budget
        shown = {k: v for k, v in fields.items() if not (k in _FLAGS and v in (False, None))}
        return ", ".join(f"{k}={v}" for k, v in shown.items())

    def expected_dtype(self, output: str, case: Case) -> torch.dtype:
        want = self.output_dtypes.get(output, "input")
        dtype = case.dtype  # type: ignore[attr-defined]  # every case model has one: tolerances are per dtype
        return TORCH_DTYPES[dtype] if want == "input" else TORCH_DTYPES[want]

    # Performance: what is timed, against what, and the least work it must do.
    def timed(self, fn: Callable[..., Any], inputs: dict[str, Any]) -> Callable[[], Any]:
        """A zero-argument callable doing exactly the work that is timed (inputs prepared)."""
        raise NotImplementedError

    def pytorch(self, inputs: dict[str, Any]) -> Callable[[], Any]:
        """PyTorch's own implementation of the same work, shown beside the student's time."""
        raise NotImplementedError

    def work(self, case: Case) -> tuple[float, float]:
        """(bytes moved at least once, floating-point operations) of one timed call."""
        raise NotImplementedError

    def memory_hint(self, case: Case, estimate: Any) -> str:
        """Over its GPU memory budget at `case`: the likely cause, for the student
        (`estimate`: a grader.engine.problems.memory_estimate.Estimate)."""
        return f"what is live at the peak: {estimate.largest()}"

    #: the outputs one `timed` call returns, in order (a sampled timed round checks them)
    timed_names: ClassVar[tuple[str, ...]] = ("out",)

    def timed_outputs(self, result: Any) -> dict[str, Any]:
        """Name the outputs of one `timed` call."""
        values = result if len(self.timed_names) > 1 else (result,)
        return dict(zip(self.timed_names, values))

    def output_shape(self, output: str, case: Case) -> tuple[int, ...]:
        """The shape output `output` must have for `case` (the timed rounds' contract check)."""
        raise NotImplementedError

    # Verified timing: every timed round gets new input contents, and a sample of rounds has a
    # sample of its outputs checked against the float64 definition. Both are drawn on the GPU
    # from seeds, so a round never waits for the CPU and the orchestrator can redraw them.
    def refill(self, inputs: dict[str, Any], case: Case, gen: torch.Generator) -> None:
        """New values in the input tensors, in place: same shapes, dtypes and layouts, drawn as
        `make_inputs` draws them. Problems override this with an in-place draw (no allocation)."""
        fresh = self.make_inputs(case, gen)
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                value.copy_(fresh[name])

    def sample(self, case: Case, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """Which output elements a verified round checks: index tensors on the generator's device."""
        raise NotImplementedError

    def take(
        self, outputs: dict[str, torch.Tensor], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The sampled elements of a timed call's outputs, labelled `output[part]` (exact tensors
        of the right shapes). Runs between timed rounds: GPU work only, no sync."""
        raise NotImplementedError

    def expected_sample(
        self, inputs: dict[str, Any], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The float64 definition of the sampled elements, labelled as `take` labels them."""
        raise NotImplementedError


class OneTensorKind(ProblemKind):
    """A problem whose function maps one tensor `x` to one output (elementwise or row by row).

    Subclasses give the float64 definition and PyTorch's op; calling, timing and expected
    outputs follow from them.
    """

    output_names = ("out",)

    @staticmethod
    def definition(x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def torch_op(x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def expected(self, inputs: dict[str, Any], case: Case) -> dict[str, torch.Tensor]:
        return {"out": self.definition(inputs["x"].double())}

    def call(
        self, fn: Callable[..., Any], inputs: dict[str, Any], case: Case, watch: Watch = nullcontext
    ) -> CallOutput:
        with watch():
            out = fn(inputs["x"])
        return CallOutput({"out": out})

    def timed(self, fn: Callable[..., Any], inputs: dict[str, Any]) -> Callable[[], Any]:
        x = inputs["x"]
        return lambda: fn(x)

    def pytorch(self, inputs: dict[str, Any]) -> Callable[[], Any]:
        x = inputs["x"]
        return lambda: self.torch_op(x)

    #: how `make_inputs` draws ordinary values: normal with this standard deviation
    value_std: ClassVar[float] = 1.0

    def refill(self, inputs: dict[str, Any], case: Case, gen: torch.Generator) -> None:
        if getattr(case, "values", "normal") != "normal":
            return super().refill(inputs, case, gen)
        inputs["x"].normal_(0.0, self.value_std, generator=gen)

    def sample(self, case: Case, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """Whole rows (the last dimension; a row-wise op needs them whole) and some of their columns."""
        shape = list(case.shape)  # type: ignore[attr-defined]  # kinds whose cases have no shape override this
        rows, width = math.prod(shape[:-1]), shape[-1]
        cols = torch.arange(width, device=gen.device) if width <= SAMPLE_COLUMNS else pick(gen, width, SAMPLE_COLUMNS)
        return {"rows": pick(gen, rows, SAMPLE_ROWS), "cols": cols}

    def output_shape(self, output: str, case: Case) -> tuple[int, ...]:
        return tuple(case.shape)  # type: ignore[attr-defined]  # kinds whose cases have no shape override this

    def take(
        self, outputs: dict[str, torch.Tensor], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        out = outputs["out"]
        return {"out": out.reshape(-1, out.shape[-1])[plan["rows"]][:, plan["cols"]]}

    def expected_sample(
        self, inputs: dict[str, Any], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        x = inputs["x"]
        rows = x.reshape(-1, x.shape[-1])[plan["rows"]].double()
        return {"out": self.definition(rows)[:, plan["cols"]]}
