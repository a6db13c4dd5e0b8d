"""The ground floor: the offline toolchain environment and pid files, which every floor above may use.

It imports nothing of ssh-gateway, so the domain core, the rig, the Pangolin emulator and the tools can all
stand on it without standing on each other.
"""
