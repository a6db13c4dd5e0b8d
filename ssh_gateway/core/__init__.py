"""The domain vocabulary of ssh-gateway, defined once and free of Pulumi."""
