"""Problem 2, softmax: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.softmax.kind import Softmax, SoftmaxCase, padded_rows, softmax_definition

KIND = Softmax()

__all__ = ["KIND", "Softmax", "SoftmaxCase", "padded_rows", "softmax_definition"]
