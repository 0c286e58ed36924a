"""`grader serve --db DB --port PORT`: the course's submission service (grader/course/service/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.commands import cluster_options
from grader.engine.orchestrator.launch import positive_int
from grader.engine.spec.model import DEFAULT_SPEC


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "serve", help="run the submission service: students submit, the queue grades, pages show results"
    )
    p.add_argument("--db", required=True, help="a SQLite file (created if new), or a postgresql://... URL")
    p.add_argument("--port", type=int, default=8000, help="the port to listen on (default 8000)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine)")
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="cuda: real kernels; cpu: the interpreter",
    )
    p.add_argument(
        "--quota",
        type=int,
        default=None,
        metavar="N",
        help="N submissions per hour for every mode, replacing assignment.toml's [service] quotas",
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        help="gradings at once (default: 1 on a CPU; on a GPU as `grader batch --jobs auto`, timing one at a time)",
    )
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml (hidden_cases.toml beside it)")
    p.add_argument("--files", default=None, help="the service's scratch folder (default: beside a SQLite file)")
    p.add_argument("--secret-file", default=None, help="the grading secret (default: GRADER_SECRET, else one kept)")
    p.add_argument("--timeout", type=float, default=None, help="wall-clock limit per problem, seconds")
    p.add_argument("--worker-user", default="nobody", help="fallback unprivileged user for the workers (as root)")
    p.add_argument("--no-kernel-cache", action="store_true", help="compile every submission's kernels afresh")
    cluster_options.add_backend_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from grader.course.service.serving import ServeOptions, serve
    from grader.engine import kernel_cache

    cluster = {"ray": cluster_options.ray_options(args), "slurm": cluster_options.slurm_options(args)}
    options = ServeOptions(
        db=args.db,
        port=args.port,
        host=args.host,
        backend=args.backend,
        device=args.device,
        quota=args.quota,
        jobs=args.jobs,
        spec=args.spec,
        files=args.files,
        secret_file=args.secret_file,
        timeout=args.timeout,
        worker_user=args.worker_user,
        kernel_cache=None if args.no_kernel_cache else kernel_cache.default_root(),
        cluster=cluster,
    )
    serve(options)
    return 0
