"""The base of every message on the wire."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Message(BaseModel):
    """Strict: a value of the wrong JSON type is refused, never coerced ("1" is not a count)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
