"""Problem 1, GeLU: the case model, the float64 definition and the kind the grader runs."""

from grader.problems.gelu.case import GeluCase
from grader.problems.gelu.definition import gelu_definition
from grader.problems.gelu.kind import Gelu

KIND = Gelu()

__all__ = ["KIND", "Gelu", "GeluCase", "gelu_definition"]
