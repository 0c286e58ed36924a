"""A copy of the assignment folder with one threshold set for every problem, for a timing experiment.

    python benchmarks/spec_variant.py --out /tmp/spec-w125 window_s=0.125
    grader grade reference --spec /tmp/spec-w125/assignment.toml ...

The copy keeps the version (the reference cache's name) and hidden_cases.toml; what it sets is
checked by loading it, so a key the spec does not know fails here, not in the grading.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.engine.assignment.load import load_assignment  # noqa: E402
from grader.engine.spec.model import DEFAULT_SPEC  # noqa: E402

INLINE = re.compile(r"^(thresholds = \{ )(.*)$", re.MULTILINE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("setting", help="KEY=NUMBER, a field of [problems.thresholds] (window_s=0.125)")
    args = parser.parse_args()
    key, _, value = args.setting.partition("=")
    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(DEFAULT_SPEC.parent, args.out)
    spec = args.out / DEFAULT_SPEC.name
    text, count = INLINE.subn(lambda m: f"{m[1]}{key} = {float(value)!r}, {m[2]}", spec.read_text())
    spec.write_text(text)
    loaded = load_assignment(spec)
    if count != len(loaded.problems) or any(getattr(p.thresholds, key) != float(value) for p in loaded.problems):
        print(f"{spec}: {key} not set on every problem ({count} inline threshold tables)", file=sys.stderr)
        return 1
    print(f"{spec}: {key} = {float(value)!r} on {count} problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
