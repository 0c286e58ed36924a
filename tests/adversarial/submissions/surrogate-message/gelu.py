"""Attack (issue 17): an exception message holding a lone surrogate, which no UTF-8 writer takes;
it made `grader grade` exit 1 and stopped a batch at this student on every run."""


def triton_gelu(x):
    raise ValueError("bad input \udcff")
