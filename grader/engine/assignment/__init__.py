"""The assignment read: assignment/assignment.toml and hidden_cases.toml into grader.engine.spec's
models, each case validated with its problem's own case model (grader.engine.problems).

- load: reading the files, merging the hidden cases, validating every case;
- checks: what the values mean (allowed ops that exist, case sizes that can run).

A room of its own above both: the models (spec) are what every problem's cases build on, and
reading them needs the problems; in one folder, spec and problems would import each other.
"""
