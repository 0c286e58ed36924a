"""Attack: os._exit inside the call."""
import os


def triton_gelu(x):
    os._exit(7)
