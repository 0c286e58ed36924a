"""Attack: announce a header of a terabyte on the reply channel."""
import os
import struct
import sys

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])

os.write(REPLY_FD, struct.pack("<Q", 1 << 40))


def triton_gelu(x):
    return x
