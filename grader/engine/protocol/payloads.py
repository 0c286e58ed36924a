"""Payloads on the wire: tensors as `torch.save` archives, checked before they are loaded."""

from __future__ import annotations

import io
import struct
import zipfile
from typing import Any

import torch

from grader.engine.protocol.frames import ProtocolError


def pack_tensors(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def unpack_tensors(blob: bytes, map_location: str | torch.device = "cpu") -> Any:
    try:
        return torch.load(io.BytesIO(blob), weights_only=True, map_location=map_location)
    except MemoryError:
        raise  # the orchestrator's own memory, within the payload's bound: the machine's fault, not the reply's
    except Exception as exc:  # noqa: BLE001 - any failure here means the blob is not valid data
        raise ProtocolError(f"could not decode the tensor payload: {type(exc).__name__}: {exc}") from None


def check_archive(blob: bytes) -> None:
    """A payload must be what torch.save writes: a zip archive of stored (uncompressed) entries.

    torch.load accepts deflated entries too, and inflates them before it checks anything: a
    megabyte of forged payload could become a gigabyte in the orchestrator. With stored entries
    only, what is loaded is never larger than what was received (torch.load checks each record's
    size against the tensor it claims to hold).
    """
    if not blob:
        return
    if not blob.startswith(b"PK\x03\x04"):
        raise ProtocolError("the payload is not a torch.save archive")
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise ProtocolError(f"the payload is not a readable archive: {exc}") from None
    total = 0
    for entry in entries:
        local = blob[entry.header_offset : entry.header_offset + 30]
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise ProtocolError("the payload's archive has a broken entry")
        (method,) = struct.unpack("<H", local[8:10])
        if entry.compress_type != zipfile.ZIP_STORED or method != zipfile.ZIP_STORED:
            raise ProtocolError("the payload's archive has compressed entries (torch.save writes none)")
        total += entry.file_size
    if total > len(blob):
        raise ProtocolError("the payload's archive claims more data than it holds")
