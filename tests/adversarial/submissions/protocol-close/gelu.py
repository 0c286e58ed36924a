"""Attack: close the reply channel at import."""
import os
import struct
import sys

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])

os.close(REPLY_FD)


def triton_gelu(x):
    return x
