"""Attack: a busy loop inside the call."""


def triton_softmax(x):
    n = 0
    while True:
        n += 1
