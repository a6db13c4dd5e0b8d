"""The ground floor: the offline toolchain environment, the one way to run a `pulumi` command
whose output a tool reads, and the local rig's managed processes with their pid files, which every floor
above may use.

It imports nothing of ssh-gateway, so the domain core, the rig, the Pangolin emulator and the tools can all
stand on it without standing on each other.
"""
