"""Pulumi dynamic providers of ssh-gateway."""
