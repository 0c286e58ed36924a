"""How students are shown: a name from the names file, else a keyed-hash pseudonym (never the id)."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable

_ADJECTIVES = (
    "amber",
    "brave",
    "brisk",
    "calm",
    "clever",
    "cosmic",
    "crisp",
    "daring",
    "eager",
    "fleet",
    "gentle",
    "golden",
    "hardy",
    "humble",
    "jolly",
    "keen",
    "lively",
    "lucky",
    "mellow",
    "mighty",
    "nimble",
    "noble",
    "plucky",
    "polar",
    "proud",
    "quick",
    "quiet",
    "rapid",
    "rustic",
    "sharp",
    "shy",
    "silent",
    "silver",
    "sly",
    "snowy",
    "solar",
    "spry",
    "steady",
    "stellar",
    "stormy",
    "sunny",
    "swift",
    "tidy",
    "tiny",
    "vivid",
    "wary",
    "wild",
    "witty",
)
_ANIMALS = (
    "badger",
    "beaver",
    "bison",
    "bobcat",
    "condor",
    "coyote",
    "crane",
    "dingo",
    "dolphin",
    "eagle",
    "falcon",
    "ferret",
    "finch",
    "gecko",
    "heron",
    "ibex",
    "jackal",
    "koala",
    "lemur",
    "lynx",
    "magpie",
    "marmot",
    "marten",
    "mink",
    "moose",
    "narwhal",
    "ocelot",
    "orca",
    "osprey",
    "otter",
    "owl",
    "panda",
    "pelican",
    "puffin",
    "quail",
    "raven",
    "seal",
    "shrike",
    "sparrow",
    "stoat",
    "swan",
    "tapir",
    "tern",
    "toucan",
    "walrus",
    "weasel",
    "wombat",
    "yak",
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


def leaderboard_alias(student: str | None, assignment: str) -> str | None:
    """A student's name on the leaderboard (its pseudonym under the class's salt), shown in their
    report; None without a student id (a lone `grader grade`)."""
    if not student:
        return None
    return pseudonym(student, os.environ.get(SALT_ENV) or assignment)
