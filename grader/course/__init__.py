"""What passes between staff, students and Gradescope, as files.

- archives: a student's upload unpacked under size, count and path rules; pack: the archive a
  student builds (`grader pack`); gradescope_metadata: reading Gradescope's export;
- export_handout: the students' repository; writeup: the write-up's generated tables;
- gradescope_package: Gradescope's autograder.zip.
"""
