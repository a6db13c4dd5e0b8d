"""Operator tools around the ssh-gateway Pulumi program: the offline toolchain environment, and later the
main job, the doctor and the preview summary."""
