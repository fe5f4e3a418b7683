"""What a run of `kernelloop optimize` leaves behind: artifacts, proof certificates, the run log."""
