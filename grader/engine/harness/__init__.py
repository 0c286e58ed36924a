"""The harness: everything that runs inside the worker, in the same process as the submission.

Started as `python -m grader.engine.harness.serve` by grader.engine.sandbox (spawned, never forked), it imports
one submission module and makes the calls the orchestrator asks for. Its modules live under four
rules, held by tests/grader/test_layout.py and tests/grader/engine/harness/test_imports_at_load.py:

1. It runs next to hostile code. Anything here can be read, patched or called by the submission;
   nothing here holds a secret, the hidden cases, the reference or a path to the results.
2. It imports everything at load. The grader's modules leave `sys.modules` before the submission
   is imported, so an import inside a function fails in the worker, and only there.
3. It binds what it needs before the submission is imported: the profiler's C functions, the
   launch counter, the tamper guard's snapshot (`watch.arm()`).
4. It returns facts and judges nothing: exact output types, profiled ops, launch counts, timings,
   sampled outputs. The orchestrator decides what they are worth.

A worker loads only `grader.engine.harness.*`, `grader.engine.problems.*` and the kernel it shares with the
trusted side (`grader.engine.spec`, `grader.engine.protocol`, `grader.engine.timing`, `grader.engine.kernel_cache`,
`grader.engine.loading`). Outside this folder only the handout imports it: its support
(`grader.engine.handout.support`, in the student's own pytest) and the process it runs each problem's
cases in (`grader.engine.handout.child`).

- serve: the worker's loop (requests in, replies out, over two pipes);
- calls: one watched call, shared with `pytest handout`; watch: launch counter, tamper guard,
  profiler; recording: what the profiler cannot see by itself;
- timed_rounds: fresh contents and sampled outputs around every timed round; l2_persisting:
  L2's persisting lines returned to normal before each timed window;
- writers: the writer check (what a watched forward returns was stored by its kernels);
  device_activity: GPU work launched outside every Triton launch and op; profiler: its entry
  points; kernel_rules: what a kernel may call, in Triton's own code generator;
- imports: the import policy; student_runtime, interpreter_compat: the same process settings and
  interpreter fixes as `pytest handout`; interpreter_driver: Triton's driver and warmups where
  there is no GPU; gpu_compile: each interpreted launch compiled for the graded GPU.
"""
