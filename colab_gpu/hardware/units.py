"""The units the package counts memory in: one home for each (a MiB is 2**20 bytes, a GiB 2**30, as PyTorch's
memory figures and its out-of-memory messages count them)."""

MIB = 2**20
GIB = 2**30
