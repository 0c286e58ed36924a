"""The assignment as data (assignment/assignment.toml and hidden_cases.toml).

- model: the pydantic models; imports nothing of the grader, so anything may import it;
- versions: the grading environment ([environment]) and the hints for another Triton;
- toml, op_names, gpu_limits: reading TOML anywhere, PyTorch's op names, what a GPU refuses.

Reading the files into the models is grader.engine.assignment's (it needs the problems, which
build on these models).
"""
