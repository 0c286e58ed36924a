"""Text from a submission, made storable whatever its bytes.

Exception messages, printed output, file names, archive member names and manifest ids all come
from students. Python hands them over as `str`, but such a str may hold lone surrogates: a
message like `ValueError("bad \\udcff")`, or a file name that was not UTF-8 (os and tarfile
decode those with surrogateescape). Those cannot be encoded as UTF-8, so writing them as JSON,
HTML or CSV raised (issue 17: `grader grade` exited 1 with a PydanticSerializationError, and a
batch stopped at that student on every run). Here every such character is written out as an
escape instead: a byte that surrogateescape kept as `\\xff`, any other lone surrogate as `\\udcff`.
Valid text, including every non-ASCII letter, is left as it is.

Text that reaches a terminal, a CSV cell or a log is also stripped of control characters
(`printable`): an archive member named with ESC or OSC sequences must not rewrite a TA's window
title, clipboard (OSC 52) or screen when they `cat gradebook.csv`. Whole escape sequences go (a
colour code leaves no `[31m` behind), then every other C0 character but tab and newline, DEL,
and C1. The record's validator applies it to every string, so every writer reads clean text.

And text is bounded here, in the same validator (`bounded`): a worker's failure message may be as
long as the protocol's 1 MiB header, and one such message per call made a 10 MB result.json
(issue 29). Each string of the record keeps at most MAX_TEXT characters (MAX_OUTPUT for a
problem's worker output), its head and its tail (a traceback's last lines say what failed) around
a note of how much was left out. A problem holds one string per case and a result one problem per
problem of the spec, so both are bounded by the spec, never by the submission.
"""

from __future__ import annotations

import re
from typing import Any

#: ESC-introduced sequences: CSI (colours, cursor, erase), OSC/DCS/APC/PM strings up to BEL or ST,
#: and any other two-character escape
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]P_^X][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
#: what is left of C0 (but tab and newline), DEL, and C1 (0x9b is a one-byte CSI)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

#: characters kept of one string of the record, and of a problem's worker output
MAX_TEXT = 8_000
MAX_OUTPUT = 20_000

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


def printable(text: str) -> str:
    """`text` safe to write anywhere a person reads it raw: encodable, and with no control characters."""
    text = safe_text(text).replace("\r\n", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    """`text` in at most `limit` characters: its first three quarters and last quarter around a note
    of what was left out (so a text cut once is never cut again)."""
    if len(text) <= limit:
        return text
    kept = limit - 64  # room for the note
    head = kept * 3 // 4
    return f"{text[:head]}\n[... {len(text) - kept} characters not kept ...]\n{text[len(text) - (kept - head) :]}"


def from_bytes(data: bytes) -> str:
    """Bytes of unknown encoding as text: UTF-8 where valid, `\\xNN` for every other byte."""
    return data.decode("utf-8", errors="backslashreplace")


def safe_value(value: Any, limit: int = MAX_TEXT) -> Any:
    """`value` with every str inside it (lists, tuples and dict keys too) printable and bounded."""
    if isinstance(value, str):
        return bounded(printable(value), limit)
    if isinstance(value, list):
        return [safe_value(v, limit) for v in value]
    if isinstance(value, tuple):
        return tuple(safe_value(v, limit) for v in value)
    if isinstance(value, dict):
        return {safe_value(k, limit): safe_value(v, limit) for k, v in value.items()}
    return value
