"""Starting, limiting and stopping the untrusted worker process.

Isolation, strongest first, as far as the machine allows (the level used is recorded in result.json):

- "namespace": the grader runs as root and may create a mount namespace. In the worker's private
  mount table the whole file system is read-only; the grader's own checkout (reference, hidden
  cases, tests, .git) is covered by an empty tmpfs on which only `grader/` and the Python runtime
  are bound back; /tmp, /var/tmp and /dev/shm are fresh private tmpfs (no other worker's scratch
  is visible, nothing written there survives); the results folder, the secret file and anything
  else named in `hide` are covered by unreadable mounts; /proc is a new instance mounted with
  `hidepid=invisible` (Linux 5.8+), so the orchestrator's command line and environment, and every
  other process, are invisible. The worker then drops to a transient user (below).
- "uid": root, but no mount namespace (for example inside Docker without CAP_SYS_ADMIN, or on
  Gradescope): the worker still drops to a transient user, and only file modes keep it from the
  secrets, so before such a worker starts a probe running as its uid must fail to open every
  hidden path; if one opens, nothing is graded (exposure.py).
- "none": the grader is not root (a student grading their own work): limits, the process
  boundary and the sweep only; the worker can do whatever the user running the grader can.

The transient user: each worker gets a uid (and gid) of its own, drawn from a range no account
uses and reserved with a lock file, so that RLIMIT_NPROC counts that worker's processes alone (a
fork bomb cannot starve another student's worker, as it could if all of them ran as `nobody`),
the worker cannot signal, trace or read the /proc files of any other worker, and the sweep can
kill every process the worker left behind — even ones that called setsid and cleared their
environment — with one `kill(-1, SIGKILL)` issued as that uid. Where no free range is mapped (a
rootless container), the worker runs as `worker_user` instead and the sweep falls back to the
process group and an environment token.

In every level the worker is spawned with a fresh interpreter (never forked from the
orchestrator), gets an environment with no secret in it, its own session and process group, an
OOM score that makes the kernel kill it before anything else, no_new_privs (setuid binaries do
not elevate), a seccomp filter that refuses namespaces and mounts (grader/engine/sandbox/seccomp.py; where it
cannot be installed, the recorded isolation says so), and rlimits on CPU time, address space
(CPU grading only: CUDA reserves more virtual memory than any sane limit), processes, file size
and core dumps. Its stdout and stderr are drained by threads that keep the first `output_bytes`
and count the rest, and every write to it and read from it is bounded by the problem's deadline,
so whatever it does, the grader returns.

The package, by concern:

- config: SandboxConfig, every limit and choice;
- isolation: IsolationPlan, what the worker may see and who it runs as (data only);
- plan: plan_isolation, the plan this machine allows for a config;
- exposure: the uid level's check that the worker's user can read no hidden path;
- uids: the transient uid leases; processes: finding, stopping and sweeping a worker's processes;
- syscalls: the C library calls; child: what the child does between fork and exec;
- scratch: the worker's private folder and environment; output: its captured stdout and stderr;
- kernel_copy: its Triton cache copied out with its own credentials;
- scope: every worker of one grading, ended with the grading however the orchestrator ends;
- process: WorkerProcess, one worker process from spawn to close.
"""
