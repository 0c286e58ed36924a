"""Records: what a grade becomes, and every file written from it.

- model: the versioned result record (pydantic), read back by every later step;
- flags: what a person should look at in a result, read off the record alone (every writer shows them);
- files: atomic writes and the templates; text: control characters stripped from untrusted text;
- report: result.json and report.html; gradescope: Gradescope's results.json;
- gradebook: the class's CSV and summary; console: the tables printed on a terminal.
"""
