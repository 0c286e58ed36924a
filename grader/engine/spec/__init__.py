"""The assignment as data (assignment/assignment.toml and hidden_cases.toml).

- model: the pydantic models; imports nothing of the grader, so anything may import it;
- load: reading the files into the models, validating each case with its problem's own model;
- checks: what the values mean (allowed ops that exist, case sizes that can run);
- versions: the grading environment ([environment]) and the hints for another Triton.
"""
