"""One module per `grader` verb: its argparse parser, and a function that runs it.

The rule of the room: argparse is imported here and nowhere else in the trusted grader but
grader.engine.orchestrator.launch (`grader grade`'s options, both ways: the contract a class launches gradings by)
and the worker's own entry point (grader.engine.harness.serve parses the argv its sandbox gives it);
a command imports what implements it only when it runs, so `grader --help` loads no torch.
cluster_options holds the options of the cluster backends.
"""
