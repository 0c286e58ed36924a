"""`grader serve`: students submit to the course's GPU machine and see their grade before the deadline.

The rules of the room: the service never grades in its own process. Each job is the same
`grader grade` child a batch runs (grader.course.batch.runners, with the secret in its environment and
the database, the stored archives and every other job's folder hidden from its workers), checked
with grader.course.batch.results.collect_result; an upload is checked with grader.course.batch.archives as
`grader batch` checks an archive. Everything a job is (its archive, state and result) is in the
database, so a server killed at any moment loses nothing and runs again what was running.

- db: the tables and their migrations; store: every read and write of them;
- tokens: students' and staff's tokens (stored hashed); quotas: the `[service]` limits;
- jobs: one job graded (unpacked, run, collected); scheduler: the queue, fair between students;
- views: what a student and the public may see of a job (hidden results wait for publication);
- limits: request sizes and rates; app and pages: the HTTP API and the HTML pages;
- client: what `grader submit` and `grader submissions` speak (the standard library only).
"""
