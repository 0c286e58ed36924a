"""Records: what a grade becomes, and every file written from it.

- model: the versioned result record (pydantic), read back by every later step;
- files: atomic writes and the templates; text: control characters stripped from untrusted text;
- report: result.json and report.html; gradescope: Gradescope's results.json;
- gradebook: the class's CSV and summary; console: the tables printed on a terminal.
"""
