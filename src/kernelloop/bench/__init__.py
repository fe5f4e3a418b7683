"""`kernelloop bench`: a suite of kernel programs with recorded references, checked for regressions."""
