"""Problem 1, GeLU: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.gelu.kind import Gelu, GeluCase, gelu_definition

KIND = Gelu()

__all__ = ["KIND", "Gelu", "GeluCase", "gelu_definition"]
