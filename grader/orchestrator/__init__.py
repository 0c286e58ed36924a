"""The orchestrator: one submission graded, from spec to Result. Trusted; never imports the submission.

- options: GradeOptions and the facts recorded about the submission and the machine;
- problem_run: one problem (its workers, its correctness cases, its timing);
- shape_timing: one benchmark shape timed, the student's windows and the reference's alternating;
- grade: the pipeline of every problem of one submission into one Result;
- trace: GRADER_TRACE, where the time of a grading went.
"""
