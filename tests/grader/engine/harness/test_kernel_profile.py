"""One warm call profiled kernel by kernel (`grader.engine.harness.kernel_profile`): the `profile` mode."""

from __future__ import annotations

import pytest
import torch

from grader.engine import protocol
from grader.engine.harness import kernel_profile


def test_kernels_are_summed_by_name_longest_first() -> None:
    lines = kernel_profile.summarize([("a", 1e-3), ("b", 5e-3), ("a", 2e-3)])
    assert [(k.name, k.calls, k.time_s) for k in lines] == [("b", 1, 5e-3), ("a", 2, pytest.approx(3e-3))]


def test_past_the_limit_the_rest_is_one_line_and_names_are_bounded() -> None:
    many = [(f"k{i}", (i + 1) * 1e-3) for i in range(20)] + [("x" * 500, 1.0)]
    lines = kernel_profile.summarize(many, limit=5)
    assert len(lines) == 5 and len(lines[0].name) == kernel_profile.NAME_CHARS
    assert lines[-1].name == "(17 other kernels)" and lines[-1].calls == 17
    assert sum(k.time_s for k in lines) == pytest.approx(sum(t for _, t in many))


def test_the_request_travels_as_a_profile_request() -> None:
    request = protocol.ProfileRequest(case={"name": "s"}, seed=1, sets=2)
    parsed = protocol.parse_request(request.model_dump())
    assert isinstance(parsed, protocol.ProfileRequest) and parsed.replies["ok"] is protocol.Profiled


@pytest.mark.gpu
def test_a_triton_kernels_time_is_found_under_its_name() -> None:
    from grader.engine.harness.watch import arm
    from tests.grader.engine.harness.kernel_support import double

    arm()
    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    profiled = kernel_profile.profile_call([lambda: double[(x.numel() // 1024,)](x, y, x.numel(), B=1024)])
    names = [k.name for k in profiled.kernels]
    assert any("double" in n for n in names), names
    assert profiled.wall_s > 0 and all(k.time_s > 0 for k in profiled.kernels)
