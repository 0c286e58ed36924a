"""Attack: end the worker at import."""
import sys

sys.exit(3)
