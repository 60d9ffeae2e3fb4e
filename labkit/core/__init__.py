"""The ground floor: what every other floor may use, and which imports no other floor.

environment (every LABKIT_* variable), errors (every error labkit raises on purpose), result (the to_dict and
str every result type shares), compat (every private PyTorch internal labkit uses, behind one module with a canary
test), procs (child processes that die with the notebook; standard library only), allocator (glibc's malloc
settings), device (choose, sync and describe the device; CPU threads).
"""
