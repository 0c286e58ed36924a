"""Attack: sleep forever at import."""
import time

while True:
    time.sleep(3600)
