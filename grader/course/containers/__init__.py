"""Docker: the grading image and one container per grading (`grader batch --docker`, `grader image`)."""
