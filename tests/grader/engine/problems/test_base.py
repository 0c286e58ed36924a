"""What every problem shares (`grader.engine.problems.base`): how a case is named in messages."""

from __future__ import annotations

from grader.engine.problems import REGISTRY

GELU = REGISTRY["gelu"]


def test_a_case_is_described_by_its_fields_and_only_the_flags_that_are_set() -> None:
    plain = GELU.case_model.model_validate({"name": "t", "suite": "cpu", "shape": [8, 16], "dtype": "float16"})
    text = GELU.describe(plain)
    assert "shape=[8, 16]" in text and "dtype=float16" in text
    assert "compile_only" not in text and "gpu_memory_gib" not in text and "name=" not in text
    flagged = plain.model_copy(update={"compile_only": True})
    assert "compile_only=True" in GELU.describe(flagged)
