"""Attack: KeyboardInterrupt inside the call (to abort the grader?)."""


def triton_gelu(x):
    raise KeyboardInterrupt
