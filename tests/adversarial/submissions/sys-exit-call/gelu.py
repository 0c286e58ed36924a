"""Attack: sys.exit inside the call."""
import sys


def triton_gelu(x):
    sys.exit(4)
