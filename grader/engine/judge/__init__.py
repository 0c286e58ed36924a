"""The judge: what decides a grade from the facts a worker sent back. Trusted; never imports a submission.

The orchestrator drives it, never the reverse: nothing here imports grader.engine.orchestrator, drives a
worker or traces a grading's time; it decides from numbers and records it is given.

- checks: one call's output against the float64 definition, and the kernel rule;
- scan: the static scan of a submission's files for known cheats; scan_rules: what it looks for, as data;
- performance: what timing a problem against the reference asks for, the rules a timed call is held
  to, its flags and its score (the timing itself runs in grader/engine/orchestrator/shape_timing.py);
  windows: the timed windows' sizes and limits; round_checks: the sampled timed rounds checked;
  reference_cache: the reference's compiled kernels kept once per machine;
- scoring: points from verdicts and speed ratios, and a result's totals (one place for both);
- fingerprint: which spec a grade was made under;
- rescore: a stored result re-scored under a changed spec, or with a GPU record's performance, no kernel run.
"""
