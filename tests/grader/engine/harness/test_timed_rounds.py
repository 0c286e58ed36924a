"""Verified timing: what decides a timed-call flag, on the GPU or through Triton's interpreter.

The hooks the timing loop calls around every round need no clock, so these tests run rounds by
hand, on the GPU where there is one and on CPU tensors otherwise, exactly as `timing.run_rounds`
orders them (refill, call, sample), and judge them with the orchestrator's own `verify_rounds`. Each
cheat has its honest twin beside it: the same file with the switch off must pass.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine.assignment.load import load_assignment
from grader.engine.harness import calls
from grader.engine.harness.timed_rounds import FreshRounds
from grader.engine.harness.watch import LaunchCounter
from grader.engine.judge.checks import kernel_check
from grader.engine.judge.performance import ReferenceSide, ShapeSeeds, review_reason, score
from grader.engine.judge.round_checks import DEFERRED_CHECK_BYTES, ShapeChecks, verify_rounds
from grader.engine.loading import load_file
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import generator
from grader.engine.records.model import ShapeTiming

ROOT = Path(__file__).resolve().parents[4]
CHEATS = ROOT / "tests" / "adversarial" / "submissions"
SPEC = load_assignment(hidden=False)
_names = itertools.count()


#: the submissions' kernels run here: the GPU, or Triton's interpreter (tests/conftest.py turns it on)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True, scope="module")
def correct_helpers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The cheats build on the correct example (`correct_matmul`), as the corpus test copies it in."""
    folder = tmp_path_factory.mktemp("helpers")
    shutil.copy(ROOT / "examples" / "submissions" / "correct" / "matmul.py", folder / "correct_matmul.py")
    sys.path.insert(0, str(folder))
    yield
    sys.path.remove(str(folder))
    sys.modules.pop("correct_matmul", None)


def load(path: Path, **switches: Any) -> Any:
    """Import a submission file as a fresh module, with module-level switches set."""
    module = load_file(path)
    for key, value in switches.items():
        setattr(module, key, value)
    return module


def matmul_case(**fields: Any) -> Any:
    return REGISTRY["matmul"].case_model(name="bench", m=130, n=48, k=32, dtype="float32", **fields)


def play_rounds(
    problem: str, case: Any, fn: Callable[..., Any], rounds: int, chunk: int = 8, refill: bool = True
) -> tuple[list[Any], dict[str, torch.Tensor], FreshRounds]:
    """`rounds` timed rounds in the order the timing loop runs them: what the worker sends back."""
    kind = REGISTRY[problem]
    seeds = ShapeSeeds.draw("test-secret", problem, case)
    # drawn where the grader draws them: on the GPU, with the GPU's generator
    sets = [kind.make_inputs(case, generator(seeds.inputs + i, DEVICE)) for i in range(2)]
    calls = [kind.timed(fn, s) for s in sets]
    hooks = FreshRounds(kind, case, sets, seeds.refill, seeds.verify)
    for i in range(rounds):
        if refill:
            hooks.before(i % 2)
        result = calls[i % 2]()
        hooks.after(result, (i + 1) % chunk == 0 or i == rounds - 1)
    verified, payload = hooks.drain()
    return verified, payload, hooks


def run_rounds(
    problem: str, case: Any, fn: Callable[..., Any], rounds: int, chunk: int = 8, refill: bool = True
) -> tuple[list[str], list[dict[str, Any]], FreshRounds]:
    """`rounds` timed rounds in the order the timing loop runs them; the flags they earn."""
    kind = REGISTRY[problem]
    verified, payload, hooks = play_rounds(problem, case, fn, rounds, chunk, refill)
    seeds = ShapeSeeds.draw("test-secret", problem, case)
    checking = kind.make_inputs(case, generator(seeds.inputs, DEVICE))
    return (
        verify_rounds(kind, SPEC.problem(problem), case, seeds, 0, rounds, verified, payload, checking),
        verified,
        hooks,
    )


def test_honest_twin_of_partial_work_passes() -> None:
    honest = load(CHEATS / "partial-work-later" / "matmul.py", FULL_CALLS=10**9)
    flags, verified, _ = run_rounds("matmul", matmul_case(), honest.triton_matmul, rounds=24)
    assert flags == []
    assert len(verified) >= 3  # every chunk's last round at least


def test_partial_work_after_the_first_calls_is_flagged_with_its_round() -> None:
    cheat = load(CHEATS / "partial-work-later" / "matmul.py")
    flags, _, _ = run_rounds("matmul", matmul_case(), cheat.triton_matmul, rounds=24)
    assert len(flags) == 1
    assert "bench, timed round" in flags[0] and "computed a wrong result" in flags[0], flags
    assert "out[" in flags[0]  # names the sampled output and its mismatching elements


def test_gelu_epilogue_is_checked_too() -> None:
    honest = load(CHEATS / "partial-work-later" / "matmul.py", FULL_CALLS=10**9)
    flags, _, _ = run_rounds("matmul", matmul_case(activation="gelu"), honest.triton_matmul, rounds=9)
    assert flags == []
    plain = lambda a, b, activation=None: honest.triton_matmul(a, b)  # noqa: E731 - forgets the epilogue
    flags, _, _ = run_rounds("matmul", matmul_case(activation="gelu"), plain, rounds=9)
    assert flags and "computed a wrong result" in flags[0]


def test_every_timed_round_sees_contents_no_earlier_round_saw() -> None:
    honest = load(CHEATS / "partial-work-later" / "matmul.py", FULL_CALLS=10**9)
    seen: list[str] = []

    def spy(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
        seen.append(hashlib.sha256(a.cpu().numpy().tobytes() + b.cpu().numpy().tobytes()).hexdigest())
        return honest.triton_matmul(a, b, activation)

    run_rounds("matmul", matmul_case(), spy, rounds=20)
    assert len(set(seen)) == 20


def test_a_cache_keyed_on_the_contents_never_serves_a_timed_round() -> None:
    cheat = load(CHEATS / "cache-by-contents" / "matmul.py")

    class Counting(dict):
        hits = 0

        def __contains__(self, key: object) -> bool:
            found = super().__contains__(key)
            Counting.hits += found
            return found

    cheat._cache = Counting()
    flags, _, _ = run_rounds("matmul", matmul_case(), cheat.triton_matmul, rounds=16)
    assert flags == [] and Counting.hits == 0
    # the same rounds without new contents (the old rotation of fixed sets): the cache serves them
    run_rounds("matmul", matmul_case(), cheat.triton_matmul, rounds=16, refill=False)
    assert Counting.hits > 0


def test_a_round_left_out_is_flagged() -> None:
    honest = load(CHEATS / "partial-work-later" / "matmul.py", FULL_CALLS=10**9)
    kind, case = REGISTRY["matmul"], matmul_case()
    seeds = ShapeSeeds.draw("test-secret", "matmul", case)
    _, verified, _ = run_rounds("matmul", case, honest.triton_matmul, rounds=8, chunk=8)
    assert [v.round for v in verified][-1] == 7
    flags = verify_rounds(
        kind,
        SPEC.problem("matmul"),
        case,
        seeds,
        0,
        8,
        verified[:-1],
        {},
        kind.make_inputs(case, generator(seeds.inputs, DEVICE)),
    )
    assert flags and "were not checked" in flags[0]


def test_a_subclass_returned_from_timed_calls_breaks_the_output_contract() -> None:
    honest = load(CHEATS / "partial-work-later" / "matmul.py", FULL_CALLS=10**9)

    class Lazy(torch.Tensor):
        pass

    calls = itertools.count()

    def sometimes_lazy(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
        out = honest.triton_matmul(a, b, activation)
        return out.as_subclass(Lazy) if next(calls) >= 2 else out

    flags, _, _ = run_rounds("matmul", matmul_case(), sometimes_lazy, rounds=8)
    assert flags and "expected exactly torch.Tensor" in flags[0]


@pytest.mark.parametrize(
    "problem, case_fields",
    [
        ("gelu", {"shape": [6, 70], "dtype": "float16"}),
        ("softmax", {"shape": [5, 5000], "dtype": "float32"}),  # wider than one sample of columns
    ],
)
def test_one_tensor_problems_sample_rows_and_columns(problem: str, case_fields: dict[str, Any]) -> None:
    reference = load(ROOT / "reference" / f"{problem}.py")
    fn = getattr(reference, SPEC.problem(problem).function)
    case = REGISTRY[problem].case_model(name="bench", **case_fields)
    flags, verified, _ = run_rounds(problem, case, fn, rounds=6, chunk=3)
    assert flags == [] and len(verified) >= 2
    half = lambda x: fn(x).index_fill_(0, torch.tensor([0, 1, 2], device=x.device), 0.0)  # noqa: E731 - leaves rows out
    flags, _, _ = run_rounds(problem, case, half, rounds=12, chunk=3)
    assert flags and "timed round" in flags[0]


# -- the kernel rule of timed calls is the rule of correctness -----------------------------------


def _attention_with_torch_backward(forward_matmul: bool) -> Callable[..., torch.Tensor]:
    """The reference's Triton forward with a PyTorch backward that recomputes from L, as the
    write-up allows; `forward_matmul` adds a PyTorch matmul to the forward (off the allow-list there)."""
    reference = load(ROOT / "reference" / "flash_attention.py")

    class TorchBackward(reference.FlashAttention2):
        @staticmethod
        def forward(
            ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
        ) -> torch.Tensor:
            if forward_matmul:
                torch.matmul(q, k.transpose(-1, -2))
            return reference.FlashAttention2.forward(ctx, q, k, v, is_causal)

        @staticmethod
        def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
            q, k, v, o, lse = ctx.saved_tensors
            scale = q.shape[-1] ** -0.5
            s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
            if ctx.is_causal:
                s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
            p = torch.exp(s - lse.unsqueeze(-1))
            do = grad_out.float()
            dv = torch.matmul(p.transpose(-1, -2), do)
            dp = torch.matmul(do, v.float().transpose(-1, -2))
            ds = p * (dp - (do * o.float()).sum(-1, keepdim=True)) * scale
            return (
                torch.matmul(ds, k.float()).to(q.dtype),
                torch.matmul(ds.transpose(-1, -2), q.float()).to(k.dtype),
                dv.to(v.dtype),
                None,
            )

    return lambda q, k, v, is_causal=False: TorchBackward.apply(q, k, v, is_causal)


@pytest.mark.parametrize("forward_matmul", [False, True], ids=["torch-backward", "torch-in-forward"])
def test_attention_kernel_rule_looks_at_the_forward_only(forward_matmul: bool) -> None:
    LaunchCounter.install()
    kind, problem = REGISTRY["flash_attention"], SPEC.problem("flash_attention")
    case = kind.case_model(name="bench", b=1, h=2, nq=32, nk=32, d=16, dtype="float32", causal=True)
    fn = _attention_with_torch_backward(forward_matmul)
    inputs = kind.make_inputs(case, generator(3, DEVICE))
    _, profile, launches = calls.watched(kind, fn, inputs, case, DEVICE)  # what correctness and timing both watch
    verdict = kernel_check(problem, case, profile["aten_ops"], launches)
    if forward_matmul:
        assert verdict and "aten::matmul" in verdict
    else:
        assert verdict is None, verdict
        flags, _, _ = run_rounds("flash_attention", case, fn, rounds=4, chunk=2)
        assert flags == []


def test_review_marks_a_large_speedup_without_taking_points() -> None:
    problem = SPEC.problem("gelu")
    shapes = [ShapeTiming(name="a", case="", ratio=1.1), ShapeTiming(name="b", case="", ratio=1.8)]
    assert "b 1.80x" in (review_reason(problem, shapes) or "")
    graded = score(problem, shapes, "H200")
    assert graded.status == "measured" and graded.score == problem.points.performance and graded.review
    assert score(problem, shapes[:1], "H200").review is None


@pytest.mark.parametrize("cheat", [False, True])
def test_checks_left_for_after_the_window_withhold_the_points_when_they_run(cheat: bool) -> None:
    """Timing no longer checks its sampled rounds inside the exclusive window: `ShapeChecks` carries
    them to `problem_result.finish`, which runs them and only then scores. A wrong round still costs
    the performance points; its honest twin keeps them."""
    switches = {} if cheat else {"FULL_CALLS": 10**9}
    fn = load(CHEATS / "partial-work-later" / "matmul.py", **switches).triton_matmul
    case = matmul_case()
    verified, payload, _ = play_rounds("matmul", case, fn, rounds=24)
    kind, problem = REGISTRY["matmul"], SPEC.problem("matmul")
    shape = ShapeTiming(name=case.name, case="", ratio=1.0, ratio_low=0.99, ratio_high=1.01)
    seeds = ShapeSeeds.draw("test-secret", "matmul", case)
    side = ReferenceSide(kind, problem, fn)
    pending = ShapeChecks(side, case, seeds, [(0, 24, verified, payload)], shape, DEVICE)
    assert score(problem, [shape], "H200").status == "measured"  # what scoring before the checks would say
    flags = pending.run()
    graded = score(problem, [shape], "H200")
    if cheat:
        assert flags and shape.flags == flags and "computed a wrong result" in flags[0]
        assert graded.status == "flagged" and graded.score == 0
    else:
        assert flags == [] and graded.status == "measured" and graded.score == problem.points.performance


def test_what_checks_keep_until_the_window_closes_is_bounded() -> None:
    """An honest worker's samples are kept for the checks after the window; a worker that sends
    far more (up to MAX_TIMING_BLOB a window) is over DEFERRED_CHECK_BYTES, and measure_shape
    then checks its rounds at once instead of keeping them."""
    fn = load(CHEATS / "partial-work-later" / "matmul.py", FULL_CALLS=10**9).triton_matmul
    case = matmul_case()
    verified, payload, _ = play_rounds("matmul", case, fn, rounds=24)
    side = ReferenceSide(REGISTRY["matmul"], SPEC.problem("matmul"), fn)
    seeds = ShapeSeeds.draw("test-secret", "matmul", case)
    honest = ShapeChecks(side, case, seeds, [(0, 24, verified, payload)], ShapeTiming(name="b", case=""))
    assert 0 < honest.held_bytes() < DEFERRED_CHECK_BYTES // 100
    flood = {**payload, "0:padding": torch.zeros(DEFERRED_CHECK_BYTES // 4 + 1)}
    hoarder = ShapeChecks(side, case, seeds, [(0, 24, verified, flood)], ShapeTiming(name="b", case=""))
    assert hoarder.held_bytes() > DEFERRED_CHECK_BYTES
