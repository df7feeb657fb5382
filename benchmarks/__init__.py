"""Benchmarks: ``python -m benchmarks NAME [args]`` or ``visionstream bench NAME [args]``."""
