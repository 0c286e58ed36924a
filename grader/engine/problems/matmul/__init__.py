"""Problem 3, matmul: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.matmul.case import Layout, MatmulCase
from grader.engine.problems.matmul.definition import matmul_definition
from grader.engine.problems.matmul.kind import Matmul

KIND = Matmul()

__all__ = ["KIND", "Layout", "Matmul", "MatmulCase", "matmul_definition"]
