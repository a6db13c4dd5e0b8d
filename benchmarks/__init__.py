"""Benchmarks through the real CLI against the Pangolin emulator; `python -m benchmarks.scale` runs them all."""
