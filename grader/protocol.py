"""The wire format between the orchestrator and the worker: framed JSON headers plus tensor blobs.

Tensors travel as `torch.save` bytes and are read back with `torch.load(weights_only=True)`, which
refuses arbitrary pickled objects: a hostile worker can send wrong data, but never code that runs
in the orchestrator. Every read is bounded in size and in time.
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time
from typing import Any

import torch

_LEN = struct.Struct("<Q")
MAX_HEADER = 1 << 20


class ProtocolError(Exception):
    """The other side sent something that is not a valid message."""


class PeerGone(Exception):
    """The other side closed its end (it exited or crashed)."""


class Deadline(Exception):
    """No complete message arrived before the deadline."""


def pack_tensors(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def unpack_tensors(blob: bytes, map_location: str | torch.device = "cpu") -> Any:
    try:
        return torch.load(io.BytesIO(blob), weights_only=True, map_location=map_location)
    except Exception as exc:  # noqa: BLE001 - any failure here means the blob is not valid data
        raise ProtocolError(f"could not decode the tensor payload: {type(exc).__name__}: {exc}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, header: dict[str, Any], blob: bytes = b"") -> None:
    head = json.dumps({**header, "blob": len(blob)}).encode()
    _write_all(fd, _LEN.pack(len(head)) + head)
    if blob:
        _write_all(fd, blob)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Deadline()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise Deadline()
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerGone()
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, deadline: float | None = None, max_blob: int = 1 << 34) -> tuple[dict[str, Any], bytes]:
    """Read one message; `deadline` is a time.monotonic() value, `max_blob` caps the payload."""
    (size,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes exceeds the {MAX_HEADER}-byte limit")
    try:
        header = json.loads(_read_exact(fd, size, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    blob_len = header.get("blob", 0)
    if not isinstance(blob_len, int) or blob_len < 0 or blob_len > max_blob:
        raise ProtocolError(f"payload size {blob_len!r} is outside 0..{max_blob}")
    return header, _read_exact(fd, blob_len, deadline) if blob_len else b""
