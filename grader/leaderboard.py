"""`grader leaderboard`: a static leaderboard site built from the grader's result.json files.

The site is two files: `index.html` (one self-contained page, CSS and JS inline, no network) and
`leaderboard.json`. Both are rendered from one dictionary, and the page embeds that same JSON, so
the published data and the page never disagree.

Students are ranked by their best graded submission (total score, then the geometric mean of the
per-problem speedups against the staff reference). Anything the grader flagged (a failed kernel
check, timing it could not trust) is listed apart and never ranked. Student ids never reach the
site: each student is shown by a keyed-hash pseudonym unless a names file maps them.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import hmac
import json
import math
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from grader.records import SCHEMA_VERSION, ProblemResult, Result
from grader.report import TEMPLATES, write_atomic
from grader import flags
from grader.scoring import geomean

FORMAT_VERSION = 2  # 2: flagged students are a count on the public page; names and reasons on the staff page
TEMPLATE = "leaderboard.html.j2"
CHART_STUDENTS = 15  # bars per problem chart, besides the reference and PyTorch
STAFF_TEMPLATE = "leaderboard_staff.html.j2"

Warn = Callable[[str], None]


class LeaderboardError(Exception):
    """Bad input the site cannot be built from; the message names the file or path."""


@dataclass(frozen=True)
class Entry:
    """One parsed result.json and the student it belongs to."""

    path: Path
    result: Result
    student: str


@dataclass
class Selection:
    """Who is ranked, who is flagged, and who has no graded submission at all."""

    ranked: list[Entry]
    flagged: list[Entry]
    failed: list[str]


# --------------------------------------------------------------------------------------------
# input


def find_result_files(paths: Sequence[Path]) -> list[Path]:
    """result.json files named directly or found under folders (recursively), each once."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_file():
            found.setdefault(path.resolve())
        elif path.is_dir():
            for hit in sorted(path.rglob("result.json")):
                if hit.is_file() and not any(part.startswith(".") for part in hit.relative_to(path).parts):
                    found.setdefault(hit.resolve())
        else:
            raise LeaderboardError(f"{path}: no such file or folder")
    return list(found)


def load_entries(files: Iterable[Path], warn: Warn) -> list[Entry]:
    """Parse each file; a malformed one is skipped with a warning that names it."""
    entries = []
    for path in files:
        try:
            result = Result.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "file"
            warn(f"skipped {path}: not a valid result.json ({where}: {first.get('msg', 'invalid')}; {exc.error_count()} error(s))")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            warn(f"skipped {path}: cannot read it ({exc})")
            continue
        if result.schema_version > SCHEMA_VERSION:
            warn(f"{path}: result schema version {result.schema_version} is newer than this grader's ({SCHEMA_VERSION}); read as version {SCHEMA_VERSION}")
        student = result.submission.student or path.parent.name
        entries.append(Entry(path=path, result=result, student=student))
    return entries


def load_names(path: Path) -> dict[str, str]:
    """Display names: a CSV `student,display_name` (header optional) or a JSON object."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LeaderboardError(f"{path}: cannot read the names file ({exc})") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LeaderboardError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise LeaderboardError(f"{path}: expected a JSON object mapping student id to display name (strings)")
        names = {k.strip(): v.strip() for k, v in data.items()}
    else:
        names = {}
        for line, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row or all(not cell.strip() for cell in row):
                continue
            if line == 1 and [c.strip().lower() for c in row[:2]] == ["student", "display_name"]:
                continue
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise LeaderboardError(f"{path}:{line}: expected 'student,display_name', got {','.join(row)!r}")
            names[row[0].strip()] = row[1].strip()
    empty = [k for k, v in names.items() if not k or not v]
    if empty:
        raise LeaderboardError(f"{path}: empty student id or display name for {empty[0]!r}")
    return names


# --------------------------------------------------------------------------------------------
# selection


def flag_reasons(result: Result) -> list[str]:
    """Why a result cannot be ranked: failed kernel checks and timing the grader did not trust."""
    return [f"{f.label}: {f.detail}" for f in flags.result_flags(result) if f.blocking]


def review_reasons(result: Result) -> list[str]:
    """What staff should look at in a ranked result (a speed to review, scan findings): points stand."""
    return [f"{f.label}: {f.detail}" for f in flags.result_flags(result) if not f.blocking]


def problem_speedup(problem: ProblemResult) -> float | None:
    perf = problem.performance
    if perf is None or perf.status != "measured" or not perf.ratio_geomean or perf.ratio_geomean <= 0:
        return None
    return perf.ratio_geomean


def overall_speedup(result: Result) -> float | None:
    """Geometric mean over problems of the per-problem speedup, where it was measured."""
    ratios = [r for r in (problem_speedup(p) for p in result.problems) if r is not None]
    return geomean(ratios) if ratios else None


def _timestamp(text: str) -> float:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def rank_key(result: Result) -> tuple[float, float]:
    """Higher is better: total score, then overall speedup (unmeasured counts as lowest)."""
    speedup = overall_speedup(result)
    return (round(result.score, 4), round(speedup, 4) if speedup is not None else -math.inf)


def select(entries: list[Entry], warn: Warn) -> Selection:
    """One entry per student: the best clean graded submission, else the best flagged one.

    The same submission (sha256) graded again counts once, as its latest grading (a regrade
    supersedes an older run of the same content); a run that failed to grade never replaces
    one that graded.
    """

    def recency(entry: Entry) -> tuple[bool, float]:
        return (entry.result.status == "graded", _timestamp(entry.result.graded_at))

    latest: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        key = (entry.student, entry.result.submission.sha256)
        old = latest.get(key)
        if old is None or recency(entry) >= recency(old):
            latest[key] = entry
    owners: dict[str, set[str]] = {}
    for student, sha in latest:
        owners.setdefault(sha, set()).add(student)
    for sha, students in owners.items():
        if len(students) > 1:
            warn(f"identical submission {sha[:12]} under several students: {', '.join(sorted(students))}")

    by_student: dict[str, list[Entry]] = {}
    for entry in latest.values():
        by_student.setdefault(entry.student, []).append(entry)

    def best(candidates: list[Entry]) -> Entry:
        return max(candidates, key=lambda e: (*rank_key(e.result), _timestamp(e.result.graded_at)))

    ranked, flagged, failed = [], [], []
    for student in sorted(by_student):
        graded = [e for e in by_student[student] if e.result.status == "graded"]
        clean = [e for e in graded if not flag_reasons(e.result)]
        if clean:
            ranked.append(best(clean))
        elif graded:
            flagged.append(best(graded))
        else:
            failed.append(student)
    return Selection(ranked=ranked, flagged=flagged, failed=failed)


# --------------------------------------------------------------------------------------------
# names

_ADJECTIVES = (
    "amber", "brave", "brisk", "calm", "clever", "cosmic", "crisp", "daring", "eager", "fleet",
    "gentle", "golden", "hardy", "humble", "jolly", "keen", "lively", "lucky", "mellow", "mighty",
    "nimble", "noble", "plucky", "polar", "proud", "quick", "quiet", "rapid", "rustic", "sharp",
    "shy", "silent", "silver", "sly", "snowy", "solar", "spry", "steady", "stellar", "stormy",
    "sunny", "swift", "tidy", "tiny", "vivid", "wary", "wild", "witty",
)
_ANIMALS = (
    "badger", "beaver", "bison", "bobcat", "condor", "coyote", "crane", "dingo", "dolphin", "eagle",
    "falcon", "ferret", "finch", "gecko", "heron", "ibex", "jackal", "koala", "lemur", "lynx",
    "magpie", "marmot", "marten", "mink", "moose", "narwhal", "ocelot", "orca", "osprey", "otter",
    "owl", "panda", "pelican", "puffin", "quail", "raven", "seal", "shrike", "sparrow", "stoat",
    "swan", "tapir", "tern", "toucan", "walrus", "weasel", "wombat", "yak",
)


#: the pseudonym key shared by `grader batch` (each student's report shows their alias) and here
SALT_ENV = "GRADER_LEADERBOARD_SALT"


def pseudonym(student: str, salt: str, digits: int = 4) -> str:
    """A stable, readable alias from a keyed hash (HMAC-SHA256) of the id.

    Nobody can turn an alias back into an id without the salt; with a guessable salt (the default
    is the assignment name) someone holding the class roster could match them, hence --salt.
    """
    digest = hmac.new(salt.encode(), student.encode(), hashlib.sha256).digest()
    adjective = _ADJECTIVES[int.from_bytes(digest[0:2], "big") % len(_ADJECTIVES)]
    animal = _ANIMALS[int.from_bytes(digest[2:4], "big") % len(_ANIMALS)]
    return f"{adjective}-{animal}-{digest[4:].hex()[:digits]}"


def display_names(students: Iterable[str], salt: str, names: dict[str, str]) -> dict[str, str]:
    """Student id -> name on the page; pseudonyms that collide get longer suffixes."""
    students = sorted(set(students))
    shown: dict[str, str] = {}
    for digits in (4, 8, 16, 64):
        shown = {s: names.get(s) or pseudonym(s, salt, digits) for s in students}
        aliases = [shown[s] for s in students if s not in names]
        if len(set(aliases)) == len(aliases):
            break
    return shown


# --------------------------------------------------------------------------------------------
# data


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _problem_order(results: list[Result]) -> list[dict[str, Any]]:
    """Problems in first-seen order, largest result first (a subset grading must not reorder)."""
    order: dict[str, dict[str, Any]] = {}
    for result in sorted(results, key=lambda r: -len(r.problems)):
        for p in result.problems:
            order.setdefault(p.name, {"name": p.name, "title": p.title or p.name, "max_score": p.max_score})
    return list(order.values())


def _competition_ranks(keys: list[Any]) -> list[int]:
    """1, 2, 2, 4 ... for keys already sorted best first."""
    ranks: list[int] = []
    for i, key in enumerate(keys):
        ranks.append(ranks[-1] if i and key == keys[i - 1] else i + 1)
    return ranks


def _gpu(result: Result, problem: ProblemResult | None = None) -> str:
    if problem is not None and problem.performance is not None and problem.performance.gpu:
        return problem.performance.gpu
    return result.environment.device


def _perf_text(problem: ProblemResult | None) -> tuple[str, str]:
    """(status shown instead of a speedup, its explanation) for a problem without a measurement."""
    if problem is None:
        return "not graded", ""
    perf = problem.performance
    if perf is None or perf.status == "not_measured":
        return "not measured", perf.reason if perf else ""
    if perf.status == "measured":
        return "measured", ""
    return perf.status.replace("_", " "), perf.reason


def _problem_table(spec: dict[str, Any], ranked: list[tuple[Entry, str]]) -> dict[str, Any]:
    """Rows for one problem: students, plus the staff reference and PyTorch per GPU (marked rows)."""
    name = spec["name"]
    shapes: dict[str, dict[str, Any]] = {}
    students = []
    # per GPU and shape: reference ms, PyTorch ms, and achieved rates rescaled to each side
    marks: dict[str, dict[str, dict[str, list[float]]]] = {}
    for entry, shown in ranked:
        problem = next((p for p in entry.result.problems if p.name == name), None)
        speedup = problem_speedup(problem) if problem else None
        status, note = _perf_text(problem)
        gpu = _gpu(entry.result, problem)
        cells: dict[str, dict[str, Any]] = {}
        if speedup is not None and problem is not None and problem.performance is not None:
            for s in problem.performance.shapes:
                shapes.setdefault(s.name, {"name": s.name, "case": s.case, "unit": s.achieved_unit})
                if not shapes[s.name]["unit"]:
                    shapes[s.name]["unit"] = s.achieved_unit
                cells[s.name] = {"ms": s.student_ms, "speedup": s.ratio, "achieved": s.achieved}
                acc = marks.setdefault(gpu, {}).setdefault(s.name, {k: [] for k in ("ref_ms", "torch_ms", "torch_speedup", "ref_achieved", "torch_achieved")})
                if s.reference_ms:
                    acc["ref_ms"].append(s.reference_ms)
                    if s.achieved and s.student_ms:
                        acc["ref_achieved"].append(s.achieved * s.student_ms / s.reference_ms)
                if s.pytorch_ms:
                    acc["torch_ms"].append(s.pytorch_ms)
                    if s.reference_ms:
                        acc["torch_speedup"].append(s.reference_ms / s.pytorch_ms)
                    if s.achieved and s.student_ms:
                        acc["torch_achieved"].append(s.achieved * s.student_ms / s.pytorch_ms)
        students.append(
            {
                "kind": "student",
                "name": shown,
                "score": problem.score if problem else None,
                "max_score": problem.max_score if problem else spec["max_score"],
                "speedup": speedup,
                "performance": status,
                "note": note,
                "gpu": gpu,
                "cells": cells,
            }
        )
    order = list(shapes)
    for row in students:
        cells = row.pop("cells")
        row["shapes"] = [cells.get(s) for s in order]
    # by speedup where measured, then (and without any measurement, only) by the problem's score
    def key(row: dict[str, Any]) -> tuple[float, float]:
        return (round(row["speedup"], 4) if row["speedup"] is not None else -math.inf, round(row["score"], 4) if row["score"] is not None else -math.inf)

    students.sort(key=lambda r: (tuple(-k for k in key(r)), r["name"]))
    graded = [r for r in students if r["score"] is not None]
    for row, rank in zip(graded, _competition_ranks([key(r) for r in graded])):
        row["rank"] = rank
    for row in students:
        row.setdefault("rank", None)
    measured = [r for r in students if r["speedup"] is not None]

    several = len(marks) > 1
    marked = []
    for gpu, per_shape in sorted(marks.items()):
        suffix = f" ({gpu})" if several else ""
        ref_cells, torch_cells = [], []
        for s in order:
            acc = per_shape.get(s)
            ref_ms = _median(acc["ref_ms"]) if acc else None
            torch_ms = _median(acc["torch_ms"]) if acc else None
            ref_cells.append({"ms": ref_ms, "speedup": 1.0, "achieved": _median(acc["ref_achieved"])} if ref_ms else None)
            torch_cells.append({"ms": torch_ms, "speedup": _median(acc["torch_speedup"]), "achieved": _median(acc["torch_achieved"])} if torch_ms else None)
        torch_ratios = [c["speedup"] for c in torch_cells if c and c["speedup"]]
        if any(ref_cells):
            marked.append({"kind": "reference", "rank": None, "name": "staff reference" + suffix, "score": None, "max_score": None, "speedup": 1.0, "performance": "measured", "note": "", "gpu": gpu, "shapes": ref_cells})
        if torch_ratios:
            marked.append({"kind": "pytorch", "rank": None, "name": "PyTorch" + suffix, "score": None, "max_score": None, "speedup": geomean(torch_ratios), "performance": "measured", "note": "", "gpu": gpu, "shapes": torch_cells})
    rows = measured + marked
    rows.sort(key=lambda r: -r["speedup"])
    rows += [r for r in students if r["speedup"] is None]
    return {**spec, "measured": bool(measured), "shapes": [shapes[s] for s in order], "rows": rows}


def build_data(
    selection: Selection,
    *,
    assignment: str,
    versions: list[str],
    title: str | None,
    salt: str | None,
    names: dict[str, str],
    built_at: datetime,
) -> dict[str, Any]:
    """The whole site as one JSON-ready dictionary (the page renders from nothing else)."""
    chosen = selection.ranked + selection.flagged
    results = [e.result for e in chosen]
    shown = display_names([e.student for e in chosen] + selection.failed, salt if salt is not None else assignment, names)
    problems = _problem_order(results)

    ordered = sorted(selection.ranked, key=lambda e: (tuple(-k for k in rank_key(e.result)), shown[e.student]))
    ranks = _competition_ranks([rank_key(e.result) for e in ordered])
    ranking = []
    for entry, rank in zip(ordered, ranks):
        r = entry.result
        by_name = {p.name: p for p in r.problems}
        ranking.append(
            {
                "kind": "student",
                "rank": rank,
                "name": shown[entry.student],
                "score": r.score,
                "max_score": r.max_score,
                "speedup": overall_speedup(r),
                "problems": [
                    {"score": by_name[p["name"]].score, "max_score": by_name[p["name"]].max_score, "speedup": problem_speedup(by_name[p["name"]])}
                    if p["name"] in by_name
                    else None
                    for p in problems
                ],
                "gpu": r.environment.device,
                "graded_at": r.graded_at,
                "review": any(f.kind == "review" for f in flags.result_flags(r)),
            }
        )

    tables = [_problem_table(p, [(e, shown[e.student]) for e in ordered]) for p in problems]
    # overall marked rows: the reference is 1.0 by definition; PyTorch is the geomean of its
    # per-problem speedups on each GPU
    torch_by_gpu: dict[str, list[float]] = {}
    for table in tables:
        for row in table["rows"]:
            if row["kind"] == "pytorch":
                torch_by_gpu.setdefault(row["gpu"], []).append(row["speedup"])
    ref_gpus = sorted({row["gpu"] for t in tables for row in t["rows"] if row["kind"] == "reference"})
    several = len(ref_gpus) > 1
    for gpu in ref_gpus:
        suffix = f" ({gpu})" if several else ""
        ranking.append({"kind": "reference", "rank": None, "name": "staff reference" + suffix, "score": None, "max_score": None, "speedup": 1.0, "problems": [None for _ in problems], "gpu": gpu, "graded_at": None})
        if torch_by_gpu.get(gpu):
            ranking.append({"kind": "pytorch", "rank": None, "name": "PyTorch" + suffix, "score": None, "max_score": None, "speedup": geomean(torch_by_gpu[gpu]), "problems": [None for _ in problems], "gpu": gpu, "graded_at": None})

    return {
        "format": FORMAT_VERSION,
        "title": title or f"{assignment} leaderboard",
        "assignment": {"name": assignment, "versions": versions},
        "built_at": built_at.astimezone(timezone.utc).isoformat(timespec="seconds"),
        "measured": any(row["speedup"] is not None for row in ranking if row["kind"] == "student"),
        "problems": problems,
        "ranking": ranking,
        "tables": tables,
        "flagged": len(selection.flagged),  # who and why: the staff page only
        "not_graded": len(selection.failed),
    }


def build_staff_data(selection: Selection, public: dict[str, Any], salt: str | None, names: dict[str, str]) -> dict[str, Any]:
    """The staff page: every student with something to look at, by id and shown name, with reasons.

    Never published: it names students next to the reasons (a failed kernel check, flagged timing,
    a speed to review, scan findings), which the public page keeps off.
    """
    chosen = selection.ranked + selection.flagged
    shown = display_names([e.student for e in chosen] + selection.failed, salt if salt is not None else public["assignment"]["name"], names)
    rows = []
    for entry in sorted(chosen, key=lambda e: e.student):
        found = flags.result_flags(entry.result)
        if not found:
            continue
        rows.append(
            {
                "student": entry.student,
                "name": shown[entry.student],
                "ranked": entry in selection.ranked,
                "score": entry.result.score,
                "max_score": entry.result.max_score,
                "flags": [{"kind": f.kind, "problem": f.problem, "detail": f.detail} for f in found],
                "path": str(entry.path),
                "graded_at": entry.result.graded_at,
            }
        )
    return {
        "format": FORMAT_VERSION,
        "title": f"{public['title']}: staff page (do not publish)",
        "assignment": public["assignment"],
        "built_at": public["built_at"],
        "rows": rows,
        "not_graded": [{"student": s, "name": shown[s]} for s in selection.failed],
    }


# --------------------------------------------------------------------------------------------
# output


def embed_json(data: Any) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' can end the element or open a comment."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fmt_points(x: float | None) -> str:
    return "–" if x is None else f"{round(x, 2):g}"


def _fmt_speedup(x: float | None) -> str:
    return "not measured" if x is None else f"×{x:.2f}"


def _fmt_ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _fmt_when(text: str | None) -> str:
    if not text:
        return "–"
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def render_html(data: dict[str, Any]) -> str:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    env.filters.update(pts=_fmt_points, speedup=_fmt_speedup, ms=_fmt_ms, rate=_fmt_rate, when=_fmt_when, epoch=lambda t: f"{_timestamp(t):.0f}" if t else "")
    return env.get_template(TEMPLATE).render(d=data, data_json=embed_json(data), chart_students=CHART_STUDENTS)


def write_staff(staff: dict[str, Any], out: Path) -> None:
    """The staff page: staff.json and index.html in their own folder, apart from the public site."""
    if out.exists() and not out.is_dir():
        raise LeaderboardError(f"{out}: exists and is not a folder")
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    env.filters.update(pts=_fmt_points, when=_fmt_when)
    write_atomic(out / "staff.json", json.dumps(staff, indent=2, ensure_ascii=False) + "\n")
    write_atomic(out / "index.html", env.get_template(STAFF_TEMPLATE).render(d=staff))


def staff_folder(out: Path) -> Path:
    """Where the staff page goes by default: beside the public site, never inside it."""
    return out.resolve().parent / f"{out.resolve().name}-staff"


def write_site(data: dict[str, Any], out: Path) -> None:
    """leaderboard.json first, then index.html: each atomic, so a reader never sees half a file."""
    if out.exists() and not out.is_dir():
        raise LeaderboardError(f"{out}: exists and is not a folder")
    write_atomic(out / "leaderboard.json", json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    write_atomic(out / "index.html", render_html(data))


def _build_time() -> datetime:
    """Now, or SOURCE_DATE_EPOCH when set, so a rebuild of the same results is byte-identical."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return datetime.now(timezone.utc)


def build_site(
    paths: Sequence[Path],
    out: Path,
    *,
    title: str | None = None,
    names_file: Path | None = None,
    salt: str | None = None,
    built_at: datetime | None = None,
    warn: Warn = lambda message: None,
    staff_out: Path | None = None,
) -> dict[str, Any]:
    """Read results, choose and rank, write SITE/index.html and SITE/leaderboard.json; returns the data."""
    names = load_names(names_file) if names_file is not None else {}
    files = find_result_files(paths)
    if not files:
        raise LeaderboardError(f"no result.json found under {', '.join(str(p) for p in paths)}")
    entries = load_entries(files, warn)
    if not entries:
        raise LeaderboardError(f"no valid result.json among {len(files)} file(s) under {', '.join(str(p) for p in paths)}")
    assignments = sorted({e.result.assignment.name for e in entries})
    if len(assignments) > 1:
        raise LeaderboardError(f"results from several assignments ({', '.join(assignments)}): build one leaderboard per assignment")
    selection = select(entries, warn)
    versions = sorted({e.result.assignment.version for e in selection.ranked + selection.flagged} or {e.result.assignment.version for e in entries})
    if len(versions) > 1:
        warn(f"results graded under several assignment versions: {', '.join(versions)}")
    unknown = sorted(set(names) - {e.student for e in entries})
    if unknown:
        warn(f"{names_file}: {len(unknown)} name(s) match no student in the results (e.g. {unknown[0]})")
    data = build_data(selection, assignment=assignments[0], versions=versions, title=title, salt=salt, names=names, built_at=built_at or _build_time())
    write_site(data, out)
    staff = staff_out or staff_folder(out)
    if staff.resolve() == out.resolve() or out.resolve() in staff.resolve().parents:
        raise LeaderboardError(f"{staff}: the staff page must not be inside the published site {out}")
    write_staff(build_staff_data(selection, data, salt, names), staff)
    return data


# --------------------------------------------------------------------------------------------
# command line


def cmd_leaderboard(args: argparse.Namespace) -> int:
    console = Console(stderr=True, soft_wrap=True)

    def warn(message: str) -> None:
        console.print(f"[yellow]warning:[/yellow] {escape(message)}")

    out = Path(args.out)
    try:
        data = build_site(
            [Path(p) for p in args.results],
            out,
            title=args.title,
            names_file=Path(args.names) if args.names else None,
            salt=args.salt if args.salt is not None else os.environ.get(SALT_ENV),
            warn=warn,
            staff_out=Path(args.staff_out) if args.staff_out else None,
        )
    except LeaderboardError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    ranked = sum(row["kind"] == "student" for row in data["ranking"])
    staff = Path(args.staff_out) if args.staff_out else staff_folder(out)
    console.print(f"wrote {escape(str(out / 'index.html'))} and leaderboard.json: {ranked} ranked, {data['flagged']} flagged, {data['not_graded']} without a graded submission")
    console.print(f"wrote the staff page (names and reasons; do not publish) to {escape(str(staff / 'index.html'))}")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `grader leaderboard` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "leaderboard",
        help="build a static leaderboard site from result.json files",
        description="Build a static leaderboard (index.html + leaderboard.json) from grader results. "
        "Each student's best graded submission is ranked by total score, then by the geometric-mean speedup "
        "against the staff reference; flagged submissions are listed apart and not ranked.",
    )
    p.add_argument("results", nargs="+", help="batch output folders (searched recursively for result.json) or result.json files")
    p.add_argument("--out", required=True, help="folder for the site (index.html, leaderboard.json)")
    p.add_argument("--title", default=None, help="page title (default: '<assignment> leaderboard')")
    p.add_argument("--names", default=None, help="display names: CSV 'student,display_name' or a JSON object; others get pseudonyms")
    p.add_argument(
        "--salt",
        default=None,
        help=f"key for the pseudonyms (default: ${SALT_ENV}, else the assignment name); keep it private so that aliases cannot be matched to a class roster",
    )
    p.add_argument("--staff-out", default=None, help="folder for the staff page with names and flag reasons (default: OUT-staff beside the site; never publish it)")
    p.set_defaults(func=cmd_leaderboard)
    return p
