"""`grader batch --gpus` on a real GPU, without Docker: the same grading code a container runs.

The GPU container path itself needs a Docker engine with the NVIDIA runtime, which the
development GPU machine lacks; these tests run everything around it that a GPU host can show.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from grader import cli
from grader.commands.batch import options_from_args
from grader.course.batch.run import run_batch
from grader.course.containers import gpus

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[4]


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_host_gpus_lists_every_cuda_device() -> None:
    assert gpus.host_gpus() == [str(i) for i in range(torch.cuda.device_count())]
    assert gpus.parse_gpus("all") == gpus.host_gpus()


def test_batch_on_the_gpu_grades_and_times_each_student(tmp_path: Path) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    shutil.copytree(ROOT / "reference", subs / "staff")
    shutil.copytree(ROOT / "examples" / "submissions" / "broken", subs / "broken")
    args = parse("batch", str(subs), "--out", str(out), "--gpus", "all", "--problems", "gelu")
    assert run_batch(options_from_args(args)) == 0
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}
    assert set(rows) == {"staff", "broken"}
    name = torch.cuda.get_device_name()
    assert rows["staff"]["gpu"] == f"{name} (GPU 0)", rows["staff"]  # slot 0: the first of --gpus all
    staff = json.loads((out / "staff" / "result.json").read_text())
    assert staff["environment"]["device"] == name
    (gelu,) = [p for p in staff["problems"] if p["name"] == "gelu"]
    assert all(t["status"] == "passed" for t in gelu["tests"])
    perf = gelu["performance"]
    assert perf["status"] == "measured", perf
    assert 0.8 < perf["ratio_geomean"] < 1.25  # the reference against itself
    broken = json.loads((out / "broken" / "result.json").read_text())
    assert next(p for p in broken["problems"] if p["name"] == "gelu")["score"] == 0
    assert float(rows["staff"]["total"]) > float(rows["broken"]["total"])
