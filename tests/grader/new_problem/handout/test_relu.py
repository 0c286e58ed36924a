"""Public tests for problem 5 (ReLU): your kernel against the float64 definition."""

PROBLEM = "relu"


def test_matches_definition(case, check):
    check(case)
