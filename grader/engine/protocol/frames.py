"""Frames on a pipe between the orchestrator and the worker: a length, a JSON header, a blob.

The bytes only: every read bounded in size, in nesting and in time (a hostile worker can make a
frame wrong, never make the orchestrator wait or grow without bound). What a frame says, and the
models that check it, are the package's (grader/engine/protocol/__init__.py).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_LEN = struct.Struct("<Q")
MAX_HEADER = 1 << 20
#: how deep a header's JSON may nest: every message is a few levels deep (a case's fields, a list of facts)
MAX_DEPTH = 32


class ProtocolError(Exception):
    """The other side sent something that is not a valid message."""


class PeerGone(Exception):
    """The other side closed its end (it exited or crashed)."""


class Deadline(Exception):
    """No complete message arrived before the deadline."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


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
    """Read one frame: its header (without the blob's length) and its blob.

    `deadline` is a time.monotonic() value, `max_blob` caps the payload.
    """
    (size,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes exceeds the {MAX_HEADER}-byte limit")
    raw = _read_exact(fd, size, deadline)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: also a 5000-digit integer
        raise ProtocolError(f"header is not JSON this grader reads: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    if _depth(header) > MAX_DEPTH:
        raise ProtocolError(f"header nests deeper than {MAX_DEPTH} levels")
    blob_len = header.pop("blob", 0)
    if not isinstance(blob_len, int) or blob_len < 0 or blob_len > max_blob:
        raise ProtocolError(f"payload size {blob_len!r} is outside 0..{max_blob}")
    return header, _read_exact(fd, blob_len, deadline) if blob_len else b""


def _depth(value: Any) -> int:
    """How deep `value` nests, walked without recursion (a hostile header cannot exhaust the stack)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        todo += [(child, level + 1) for child in children if isinstance(child, (dict, list))]
    return deepest


def write(fd: int, head: dict[str, Any], blob: bytes = b"") -> None:
    """One frame: the header with the blob's length, then the blob."""
    data = json.dumps({**head, "blob": len(blob)}).encode()
    _write_all(fd, _LEN.pack(len(data)) + data)
    if blob:
        _write_all(fd, blob)
