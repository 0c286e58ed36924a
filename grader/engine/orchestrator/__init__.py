"""The orchestrator: one submission graded, from spec to Result. Trusted; never imports the submission.

- launch: `grader grade`'s command line both ways, the contract grader.course launches gradings by;
- options: GradeOptions and the facts recorded about the submission and the machine;
- problem_run: one problem's run (its workers, its correctness cases); first_calls, timed_shapes and
  problem_result: its later steps (first calls, timing, result), each a function of the run;
- shape_timing: one benchmark shape timed, the student's windows and the reference's alternating;
- grade: the pipeline of every problem of one submission into one Result;
- trace: GRADER_TRACE, where the time of a grading went.
"""
