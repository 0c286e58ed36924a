"""Gradescope's submission metadata: an export's submission_metadata.yml, the autograder's .json.

Apart from the results (`grader.engine.records.gradescope`) so that grading, which writes results.json in the
grading image, does not need a YAML library; only batch discovery and the autograder read these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

#: an export's metadata is a few hundred bytes a student: a larger file is not one
MAX_METADATA_BYTES = 8 << 20
#: an id longer than this is not an id (checked before it is turned into a string)
MAX_ID_CHARS = 200


class _RubyTolerantLoader(yaml.SafeLoader):
    """Safe YAML that reads Ruby's tagged values (`!ruby/object:BigDecimal ...`) as plain data.

    Aliases are refused: nested ones make a few hundred bytes expand into a structure of hundreds
    of megabytes (a batch died in discovery with MemoryError), and Gradescope writes none.
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases are not allowed in submission metadata")
        return super().compose_node(parent, index)


def _untagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


_RubyTolerantLoader.add_multi_constructor("!", _untagged)


def _key(mapping: dict[Any, Any], name: str) -> Any:
    """A field written by Ruby (`:sid:`, read as ':sid') or by anything else (`sid`)."""
    return mapping.get(f":{name}", mapping.get(name))


def person_id(person: dict[Any, Any]) -> str:
    """A submitter's id: the student id, else the email's local part, else the name."""
    sid = _key(person, "sid")
    email = _key(person, "email")
    name = _key(person, "name")
    email = email.split("@")[0] if isinstance(email, str) else None
    for value in (sid, email, name):
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value not in ("", "~"):
            text = str(value).strip()
            return text if len(text) <= MAX_ID_CHARS else ""
    return ""


def group_id(people: list[Any]) -> str:
    """A group submission's id joins its members' ids with '+'."""
    return "+".join(i for i in (person_id(p) for p in people if isinstance(p, dict)) if i)


def read_export_metadata(path: Path) -> dict[str, str]:
    """submission folder -> student id, from a Gradescope export's submission_metadata.yml.

    A file that is not valid YAML or not the expected shape gives no ids (the folders keep
    their own names) rather than stopping the batch.
    """
    try:
        if path.stat().st_size > MAX_METADATA_BYTES:
            return {}
        data = yaml.load(path.read_text(encoding="utf-8", errors="replace"), Loader=_RubyTolerantLoader)
    except (OSError, yaml.YAMLError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    ids: dict[str, str] = {}
    for folder, entry in data.items():
        if not isinstance(entry, dict):
            continue
        people = _key(entry, "submitters")
        found = group_id(people) if isinstance(people, list) else ""
        if found:
            ids[str(folder)] = found
    return ids


def read_submission_metadata(path: Path) -> str | None:
    """The student id from the autograder's /autograder/submission_metadata.json (its `users`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    users = data.get("users") if isinstance(data, dict) else None
    return (group_id(users) or None) if isinstance(users, list) else None
