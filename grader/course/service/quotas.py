"""The `[service]` limits: how many submissions of a mode a student may make, and until when.

Windows slide: a submission counts against "per hour" for the hour after it was made, so the
refusal can say exactly when the next one is allowed. Staff re-runs count against nobody.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from grader.engine.spec.model import Mode, Quota, Service

HOUR, DAY = 3600.0, 86400.0


@dataclass(frozen=True)
class Refusal:
    """Why a submission is not taken: the limit, in words, and when it resets (None: never)."""

    limit: str
    message: str
    resets_at: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"error": self.message, "limit": self.limit, "resets_at": iso(self.resets_at)}


def iso(when: float | None) -> str | None:
    return None if when is None else datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="seconds")


def effective(service: Service, override: int | None) -> dict[Mode, Quota]:
    """The quota of each mode: the spec's, or `grader serve --quota N` (N an hour, for every mode)."""
    if override is None:
        return dict(service.quota)
    return {mode: Quota(per_hour=override, per_day=None) for mode in service.quota}


def check(quota: Quota, mode: str, made: list[float], now: float) -> Refusal | None:
    """`made`: when this student's earlier submissions of this mode were made."""
    for window, label, cap in ((HOUR, "hour", quota.per_hour), (DAY, "day", quota.per_day)):
        if cap is None:
            continue
        if cap == 0:
            return Refusal(f"{mode} per {label}", f"quota: {mode} submissions are not open")
        inside = sorted(t for t in made if t > now - window)
        if len(inside) >= cap:
            resets = inside[len(inside) - cap] + window
            when = f"; the next one at {iso(resets)}"
            return Refusal(
                f"{mode} per {label}",
                f"quota: {cap} {mode} submission(s) per {label}, all used{when}",
                resets,
            )
    return None


def remaining(quota: Quota, made: list[float], now: float) -> dict[str, int | None]:
    """What is left this hour and this day (None: no limit)."""
    left: dict[str, int | None] = {}
    for window, label, cap in ((HOUR, "hour", quota.per_hour), (DAY, "day", quota.per_day)):
        left[f"per_{label}"] = None if cap is None else max(0, cap - sum(t > now - window for t in made))
    return left


def deadline_refusal(service: Service, mode: str, now: float) -> tuple[Refusal | None, bool]:
    """After the deadline: (a refusal, or None and whether the submission is late)."""
    if service.deadline is None or now <= service.deadline.timestamp():
        return None, False
    passed = f"the deadline ({service.deadline.isoformat()}) has passed"
    if service.late == "closed":
        return Refusal("deadline", f"{passed}: the service takes no more submissions"), False
    if mode == "final" and service.late == "refuse":
        return Refusal(
            "deadline", f"{passed}: final submissions are closed (test, benchmark and profile stay open)"
        ), False
    return None, mode == "final"


def finals_visible(service: Service, published_at: float | None, now: float) -> bool:
    """Hidden results leave the server only once staff publish them, or after the deadline."""
    if published_at is not None:
        return True
    return service.deadline is not None and now > service.deadline.timestamp()
