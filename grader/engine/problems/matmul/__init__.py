"""Problem 3, matmul: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.matmul.kind import Layout, Matmul, MatmulCase, matmul_definition

KIND = Matmul()

__all__ = ["KIND", "Layout", "Matmul", "MatmulCase", "matmul_definition"]
