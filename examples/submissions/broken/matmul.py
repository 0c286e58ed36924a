"""Example submission, broken: never returns (the grader's time limit ends it)."""

import time


def triton_matmul(a, b, activation=None):
    while True:
        time.sleep(1)
