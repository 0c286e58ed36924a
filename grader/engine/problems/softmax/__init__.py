"""Problem 2, softmax: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.softmax.case import SoftmaxCase
from grader.engine.problems.softmax.definition import softmax_definition
from grader.engine.problems.softmax.kind import Softmax, padded_rows

KIND = Softmax()

__all__ = ["KIND", "Softmax", "SoftmaxCase", "padded_rows", "softmax_definition"]
