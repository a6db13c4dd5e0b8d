"""Provider tests: real HTTP against the local Pangolin emulator."""
