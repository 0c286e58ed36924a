"""One module per `grader` verb: its argparse parser, and a function that runs it.

The rule of the room: argparse is imported here and nowhere else in the trusted grader (the
worker's own entry point, grader.harness.serve, parses the argv its sandbox gives it), and a
command imports what implements it only when it runs, so `grader --help` loads no torch.
grading_options and cluster_options hold the options several verbs share.
"""
