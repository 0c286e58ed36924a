"""Problem 1, GeLU: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.gelu.case import GeluCase
from grader.engine.problems.gelu.definition import gelu_definition
from grader.engine.problems.gelu.kind import Gelu

KIND = Gelu()

__all__ = ["KIND", "Gelu", "GeluCase", "gelu_definition"]
