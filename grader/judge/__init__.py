"""The judge: what decides a grade from the facts a worker sent back. Trusted; never imports a submission.

- checks: one call's output against the float64 definition, and the kernel rule;
- scan: the static scan of a submission's files for known cheats; scan_rules: what it looks for, as data;
- performance: timing a problem against the reference and the rules a timed call is held to;
  reference_cache: the reference's compiled kernels kept once per machine;
- scoring: points from verdicts and speed ratios, and a result's totals (one place for both);
- flags: what a human should look at; fingerprint: which spec a grade was made under;
- rescore: a stored result re-scored under a changed spec, no kernel run.
"""
