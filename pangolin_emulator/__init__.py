"""Pangolin Integration API emulator: a test double written from the contract only.

Run it with `python -m pangolin_emulator --help`; drive it from tests with
`pangolin_emulator.harness.running_emulator`. It shares no code with `providers/`, so a
misreading of the API cannot pass on both sides.
"""
