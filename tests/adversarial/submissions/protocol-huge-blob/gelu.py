"""Attack: announce a terabyte of payload on the reply channel."""
import json
import os
import struct
import sys

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])

_head = json.dumps({"status": "ready", "blob": 1 << 40}).encode()
os.write(REPLY_FD, struct.pack("<Q", len(_head)) + _head)


def triton_gelu(x):
    return x
