"""What passes between staff, students and Gradescope, as files.

- archives: a student's upload unpacked under size, count and path rules; pack: the archive a
  student builds (`grader pack`); gradescope_metadata: reading Gradescope's export;
- export_handout: the students' repository; writeup: the write-up's generated tables;
- gradescope_package: Gradescope's autograder.zip;
- service/: `grader serve`, the same exchange live: uploads checked as archives are, a queue
  graded by the batch's runners, tokens, quotas and pages. A package here rather than a room of
  its own: grader/ holds at most 20 rooms (tests/grader/test_layout.py), and the service is what
  this room already is (what passes between staff and students), over HTTP instead of files.
"""
