"""Attack: write garbage on the reply channel before the harness says it is ready."""
import os
import struct
import sys

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])

os.write(REPLY_FD, b"\x07\x00\x00\x00\x00\x00\x00\x00not json")


def triton_gelu(x):
    return x
