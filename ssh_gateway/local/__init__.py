"""The local rig: the demo, a loopback sshd and a local control plane (the emulator: pangolin_emulator.harness)."""
