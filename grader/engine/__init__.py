"""The engine: one submission folder graded into result.json, report.html and Gradescope's
results.json (`grader grade`). It knows nothing of a class; grader.course launches it through
grader.engine.orchestrator.launch and reads its records (grader.engine.records)."""
