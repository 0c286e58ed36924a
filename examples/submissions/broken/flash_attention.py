"""Example submission, broken: exits the process in the middle of the call."""

import sys


def flash_attention(q, k, v, is_causal=False):
    sys.exit(3)
