"""kernelloop: make CUDA kernels faster and prove it."""
__version__ = "0.1.0"
