"""The grading engine of the Triton kernels assignment: read this package top-down from cli.py."""
