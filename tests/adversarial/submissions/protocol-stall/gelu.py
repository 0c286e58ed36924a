"""Attack: claim to be ready, then never read a request (the grader's write would block)."""
import json
import time
import os
import struct
import sys

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])

_head = json.dumps({"status": "ready", "blob": 0}).encode()
os.write(REPLY_FD, struct.pack("<Q", len(_head)) + _head)
time.sleep(3600)
