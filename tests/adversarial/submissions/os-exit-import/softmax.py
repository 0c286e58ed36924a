"""Attack: end the worker abruptly at import."""
import os

os._exit(5)
