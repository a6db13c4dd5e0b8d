"""Pulumi components of ssh-gateway, and the pure helpers they are built from."""
