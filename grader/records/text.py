"""Text from a submission, made storable whatever its bytes.

Exception messages, printed output, file names, archive member names and manifest ids all come
from students. Python hands them over as `str`, but such a str may hold lone surrogates: a
message like `ValueError("bad \\udcff")`, or a file name that was not UTF-8 (os and tarfile
decode those with surrogateescape). Those cannot be encoded as UTF-8, so writing them as JSON,
HTML or CSV raised (issue 17: `grader grade` exited 1 with a PydanticSerializationError, and a
batch stopped at that student on every run). Here every such character is written out as an
escape instead: a byte that surrogateescape kept as `\\xff`, any other lone surrogate as `\\udcff`.
Valid text, including every non-ASCII letter, is left as it is.
"""

from __future__ import annotations

from typing import Any

SURROGATES = range(0xD800, 0xE000)
ESCAPED_BYTES = range(0xDC80, 0xDD00)  # what surrogateescape makes of the bytes 0x80-0xff


def safe_text(text: str) -> str:
    """`text` with every lone surrogate escaped: always encodable as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    out = []
    for char in text:
        code = ord(char)
        if code in ESCAPED_BYTES:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code in SURROGATES:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def from_bytes(data: bytes) -> str:
    """Bytes of unknown encoding as text: UTF-8 where valid, `\\xNN` for every other byte."""
    return data.decode("utf-8", errors="backslashreplace")


def safe_value(value: Any) -> Any:
    """`value` with safe_text applied to every str inside it (lists, tuples and dict keys too)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        return [safe_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(safe_value(v) for v in value)
    if isinstance(value, dict):
        return {safe_value(k): safe_value(v) for k, v in value.items()}
    return value
