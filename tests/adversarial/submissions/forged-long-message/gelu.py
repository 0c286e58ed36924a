"""Attack: forge the worker's greeting, an import failure whose message and traceback are 450 kB each.

The harness trims what it sends, but a submission can write its own frame on the reply channel:
stored whole, one such message per field made a result.json of megabytes (issue 29).
"""
import json
import os
import struct
import sys


FORGE = True
if FORGE:
    REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])
    head = json.dumps(
        {"status": "import_error", "type": "X", "message": "FORGED " * 64_000, "traceback": "T" * 450_000, "blob": 0}
    ).encode()
    os.write(REPLY_FD, struct.pack("<Q", len(head)) + head)
    os._exit(0)

from correct_gelu import triton_gelu  # noqa: E402,F401  (a correct kernel: the attack is above)
