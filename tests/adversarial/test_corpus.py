"""The adversarial corpus: every hostile submission of corpus.toml, graded through the real CLI.

Each entry is graded in its own `grader grade` process (the orchestrator), forked from one that
imported the grader once (tests/cli_fork.py), so that gradings run side by side, so that an
attack on the orchestrator would show as a crashed process, and so that the orchestrator's peak
memory can be read back. Only the entries whose tests were selected are graded, once per
session. On top of each entry's own assertions, every grading must: exit 0, write a valid
result, leave the submission folder as it was, and leave no worker process behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine.records.model import Result
from tests import cli_fork
from tests.cli_fork import ForkedCLI, forking
from tests.spec_support import spec_with_limit

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORRECT = ROOT / "examples" / "submissions" / "correct"
CORPUS: list[dict[str, Any]] = tomllib.loads((HERE / "corpus.toml").read_text())["attack"]


def _honest_twin(entry: dict[str, Any]) -> dict[str, Any]:
    """The cheat with its switch off: what an honest student writes; it must lose nothing."""
    return {
        "name": f"{entry['name']}-honest",
        "source": entry["name"],
        "replace": entry["honest_twin"],
        "attack": f"the honest twin of {entry['name']}",
        "caught_by": "nothing to catch: it must lose no point",
        "problem": entry["problem"],
        "verdict": "passed",
        "gpu": entry.get("gpu", False),
        "helpers": entry.get("helpers", []),
        "honest": True,
    }


CORPUS += [_honest_twin(e) for e in CORPUS if "honest_twin" in e]
BY_NAME = {a["name"]: a for a in CORPUS}
IS_ROOT = os.geteuid() == 0
HAS_GPU = torch.cuda.is_available()
PARALLEL = max(3, min(6, (os.cpu_count() or 2) + 1))
GRADE_LIMIT_S = 400


@dataclass
class Graded:
    """One entry after grading: what the CLI did and what it wrote."""

    entry: dict[str, Any]
    places: dict[str, str]
    returncode: int
    stderr: str
    result: dict[str, Any] | None
    result_files: dict[str, str] = field(default_factory=dict)
    max_rss_mb: float = 0.0
    submission_changed: bool = False
    leftovers: list[str] = field(default_factory=list)

    def sub(self, text: str) -> str:
        for key, value in self.places.items():
            text = text.replace(f"@@{key}@@", value)
        return text

    def problem(self, name: str) -> dict[str, Any]:
        assert self.result is not None, f"no result.json; the CLI said:\n{self.stderr[-3000:]}"
        found = {p["name"]: p for p in self.result["problems"]}
        assert name in found, f"{name} was not graded: {list(found)}"
        return found[name]

    def text(self, name: str) -> str:
        """What the report says of the problem: its message, output, tests and why performance scored as it did."""
        problem = self.problem(name)
        reason = (problem.get("performance") or {}).get("reason", "")
        return "\n".join([problem["message"], problem["output"], reason, *(t["message"] for t in problem["tests"])])


def _selected(entry: dict[str, Any]) -> bool:
    return (HAS_GPU or not entry.get("gpu")) and (IS_ROOT or not entry.get("root"))


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _processes_mentioning(needle: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in cmdline:
                found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def _build(entry: dict[str, Any], base: Path) -> tuple[Path, dict[str, str], list[str]]:
    """The submission folder for `entry` with placeholders filled in, and the CLI arguments."""
    work = base / entry["name"]
    submission, out, tmp = work / "submission", work / "out", work / "tmp"
    tmp.mkdir(parents=True)
    places = {
        "ROOT": str(ROOT),
        "OUT": str(out),
        "SUBMISSION": str(submission),
        "TOKEN": f"corpus-{entry['name']}-{secrets.token_hex(4)}",
        "SECRET_FILE": str(work / "secret.txt"),
        "MARKER": str(work / "pickle-ran"),
        "TMP": str(tmp),
    }
    source = HERE / "submissions" / entry.get("source", entry["name"])
    if entry.get("make") is None:
        shutil.copytree(source, submission)
        for path in submission.rglob("*.py"):
            text = path.read_text()
            for key, value in places.items():
                text = text.replace(f"@@{key}@@", value)
            if "replace" in entry:
                assert entry["replace"][0] in text or path.name != f"{entry['problem']}.py", (
                    f"{entry['replace'][0]!r} is not in {path}"
                )
                text = text.replace(*entry["replace"])
            path.write_text(text)
    else:
        submission.mkdir()
        if entry["make"] == "symlink":
            (submission / "gelu.py").symlink_to(ROOT / "reference" / "gelu.py")
        elif entry["make"] == "fifo":
            os.mkfifo(submission / "gelu.py")
    for other in entry.get("others", {}):
        shutil.copy(CORRECT / f"{other}.py", submission / f"{other}.py")
    for helper in entry.get("helpers", []):
        shutil.copy(CORRECT / f"{helper}.py", submission / f"correct_{helper}.py")
    problems = [entry["problem"], *entry.get("others", {})]
    device = "cuda" if entry.get("gpu") else "cpu"
    args = ["grade", str(submission), "--out", str(out), "--problems", ",".join(problems), "--device", device]
    if not entry.get("hidden"):  # an attack's verdict comes from the public cases; the honest corpus grades every case
        args.append("--public-only")
    if (
        "timeout" in entry
    ):  # the attacked problem's limit only: the others keep the spec's (no race with a slow machine)
        args += ["--spec", str(spec_with_limit(submission.parent / "spec", entry["problem"], entry["timeout"]))]
    if entry.get("secret") == "file":
        Path(places["SECRET_FILE"]).write_text("SENTINEL-FILE-SECRET\n")
        args += ["--secret-file", places["SECRET_FILE"]]
    elif entry.get("secret") == "argv":
        args += ["--secret", "SENTINEL-ARGV-SECRET"]
    return submission, places, args


def _grade(entry: dict[str, Any], base: Path, cli: ForkedCLI | None = None) -> Graded:
    submission, places, args = _build(entry, base)
    before = _tree_digest(submission)
    out = Path(places["OUT"])
    rss_file = Path(places["TMP"]).parent / "maxrss"
    env = {**os.environ, "TMPDIR": places["TMP"], "GRADER_SECRET": "SENTINEL-ENV-SECRET", "PYTHONPATH": str(ROOT)}
    # /proc shows a forked child the server's command line and first environment, not its own: an
    # attack reading the orchestrator's (the secret entries) needs an orchestrator exec'd for it
    via = None if entry.get("secret") else cli
    finished = cli_fork.run(args, env=env, cwd=ROOT, timeout=GRADE_LIMIT_S, via=via, rss=rss_file)
    code, stderr = finished.grading(GRADE_LIMIT_S)
    result_path = out / "result.json"
    result = json.loads(result_path.read_text()) if result_path.is_file() else None
    files = (
        {str(p.relative_to(out)): p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()}
        if out.is_dir()
        else {}
    )
    graded = Graded(entry, places, code, stderr, result, files)
    graded.max_rss_mb = int(rss_file.read_text()) / 1024 if rss_file.is_file() else 0.0
    graded.submission_changed = entry.get("make") != "fifo" and _tree_digest(submission) != before
    graded.leftovers = _processes_mentioning(places["TMP"])
    if entry.get("leftover"):
        graded.leftovers += _processes_mentioning(graded.sub(entry["leftover"]))
    return graded


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graded]:
    """Grade the selected entries, side by side, slowest first (the hangs run out their limits).

    GPU entries go one at a time, as a batch grades one submission per GPU: side by side, the
    memory hog would take the memory another entry's kernels need.
    """
    wanted = [
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "name" in item.callspec.params
    ]
    entries = [BY_NAME[n] for n in dict.fromkeys(wanted) if _selected(BY_NAME[n])]
    entries.sort(key=lambda e: -e.get("timeout", 0))
    base = tmp_path_factory.mktemp("corpus")
    cli = ForkedCLI({**os.environ, "PYTHONPATH": str(ROOT)}) if forking() and entries else None
    try:
        graded = {e["name"]: _grade(e, base, cli) for e in entries if e.get("gpu")}
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            futures = {e["name"]: pool.submit(_grade, e, base, cli) for e in entries if not e.get("gpu")}
            return graded | {name: future.result() for name, future in futures.items()}
    finally:
        if cli is not None:
            cli.close()


def _param(entry: dict[str, Any]) -> Any:
    marks = []
    if entry.get("gpu"):
        marks.append(pytest.mark.gpu)
    if entry.get("root") and not IS_ROOT:
        marks.append(
            pytest.mark.skip(reason="this defence needs the grader to run as root (namespace or uid isolation)")
        )
    return pytest.param(entry["name"], marks=marks, id=entry["name"])


@pytest.mark.parametrize("name", [_param(e) for e in CORPUS])
def test_attack_gets_its_verdict(name: str, corpus: dict[str, Graded]) -> None:
    graded = corpus[name]
    entry = graded.entry
    assert graded.returncode == 0, f"the grader did not finish cleanly ({graded.returncode}):\n{graded.stderr[-3000:]}"
    assert graded.result is not None
    Result.model_validate(graded.result)
    problem = graded.problem(entry["problem"])
    text = graded.text(entry["problem"])
    findings = {f["rule"] for f in problem["findings"]}
    for rule in entry.get("findings", []):
        assert rule in findings, f"the static scan did not report {rule!r}: {sorted(findings)}"
    if entry.get("undefended"):
        if problem["status"] == entry["verdict"]:
            pytest.fail(f"{name} is caught now: move it out of the known holes (corpus.toml, docs/defenses.md)")
        pytest.xfail(entry["undefended"])
    if "verdict" in entry:
        assert problem["status"] == entry["verdict"], (
            f"status {problem['status']}, expected {entry['verdict']}:\n{text[:3000]}"
        )
    if "score" in entry:
        assert problem["score"] == entry["score"], text[:3000]
    for needle in entry.get("message", []):
        assert graded.sub(needle) in text, f"{graded.sub(needle)!r} is not in the report:\n{text[:3000]}"
    for needle in entry.get("output", []):
        assert graded.sub(needle) in problem["output"], (
            f"{graded.sub(needle)!r} is not in the worker output:\n{problem['output'][:3000]}"
        )
    for needle in entry.get("absent_text", []):
        for file, content in graded.result_files.items():
            assert needle not in content, f"{needle!r} leaked into {file}"
    for path in entry.get("absent", []):
        assert not os.path.lexists(graded.sub(path)), f"the attack wrote {graded.sub(path)}"
    if "performance" in entry:
        assert problem["performance"]["status"] in entry["performance"] and not problem["performance"]["score"]
    if "measured_below" in entry or entry.get("honest"):
        perf = problem["performance"]
        if HAS_GPU:
            assert perf["status"] == "measured", f"performance {perf['status']}: {perf.get('reason')}"
            assert not any(s["flags"] for s in perf["shapes"]), perf["shapes"]
        ratios = [s["ratio"] for s in perf["shapes"]]
        assert all(r < entry.get("measured_below", float("inf")) for r in ratios), ratios
    if entry.get("honest"):
        correctness = sum(t["score"] for t in problem["tests"])
        assert problem["status"] == "passed" and correctness > 0, text[:3000]
    if "max_result_kb" in entry:
        size = len(graded.result_files["result.json"].encode())
        assert size < entry["max_result_kb"] << 10, f"result.json is {size} bytes"
    if "max_rss_mb" in entry:
        assert 0 < graded.max_rss_mb < entry["max_rss_mb"], f"the orchestrator peaked at {graded.max_rss_mb:.0f} MB"
    for other, status in entry.get("others", {}).items():
        assert graded.problem(other)["status"] == status, f"{other} was affected: {graded.text(other)[:2000]}"


@pytest.mark.parametrize("name", [_param(e) for e in CORPUS])
def test_attack_leaves_nothing_behind(name: str, corpus: dict[str, Graded]) -> None:
    """No worker process outlives its grading; the submission folder is as it was."""
    graded = corpus[name]
    assert not graded.leftovers, f"processes left behind: {graded.leftovers}"
    assert not graded.submission_changed, "the grading changed the submission folder"
    out_files = set(graded.result_files)
    assert {"result.json", "report.html", "gradescope/results.json"} <= out_files
    assert not any("pwned" in f for f in out_files), sorted(out_files)


def test_corpus_table_matches_the_folders() -> None:
    """Every folder is in the table and every table entry has its folder (or is built by the test)."""
    folders = {p.name for p in (HERE / "submissions").iterdir() if p.is_dir()}
    listed = {e["name"] for e in CORPUS if "make" not in e and "source" not in e}
    assert folders == listed, (folders - listed, listed - folders)
    for entry in CORPUS:
        assert {"attack", "caught_by", "problem"} <= set(entry), entry["name"]
        assert entry.get("verdict") in (None, "passed", "partial", "failed", "error"), entry["name"]


def test_every_attack_is_listed_in_the_defences_page() -> None:
    page = (ROOT / "docs" / "defenses.md").read_text()
    missing = [e["name"] for e in CORPUS if "source" not in e and f"`{e['name']}`" not in page]
    assert not missing, f"docs/defenses.md does not list {missing}"


def test_default_secret_warns_when_hidden_cases_are_graded(tmp_path: Path) -> None:
    """Hidden cases graded with the default secret get a loud warning (grade and batch); a real one does not."""
    folder = tmp_path / "class" / "student1"
    shutil.copytree(HERE / "submissions" / "torch-gelu", folder)
    env = {k: v for k, v in os.environ.items() if k != "GRADER_SECRET"}
    cli = [sys.executable, "-m", "grader.cli"]
    common = ["--problems", "gelu", "--device", "cpu"]
    runs = {
        "default": ([*cli, "grade", str(folder), "--out", str(tmp_path / "default"), *common], env),
        "secret": (
            [*cli, "grade", str(folder), "--out", str(tmp_path / "secret"), *common],
            {**env, "GRADER_SECRET": "a real one"},
        ),
        "public": ([*cli, "grade", str(folder), "--out", str(tmp_path / "public"), "--public-only", *common], env),
        "batch": ([*cli, "batch", str(tmp_path / "class"), "--out", str(tmp_path / "batch"), *common], env),
    }
    procs = {
        k: subprocess.Popen(argv, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for k, (argv, e) in runs.items()
    }
    said = {k: p.communicate(timeout=GRADE_LIMIT_S)[0] for k, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values()), said
    warnings = {
        k: json.loads((tmp_path / k / "result.json").read_text())["warnings"] for k in ("default", "secret", "public")
    }
    warnings["batch"] = json.loads((tmp_path / "batch" / "student1" / "result.json").read_text())["warnings"]
    assert any("default secret" in w for w in warnings["default"]) and "default secret" in said["default"]
    assert any("default secret" in w for w in warnings["batch"])
    assert warnings["secret"] == [] and "default secret" not in said["secret"]
    assert warnings["public"] == [], "no hidden cases, nothing to protect: no warning"
