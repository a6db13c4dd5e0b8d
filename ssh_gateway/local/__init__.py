"""The local rig: the demo, a loopback sshd, the Pangolin emulator launcher and a local control plane."""
