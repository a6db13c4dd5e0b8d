"""The operator's tools around the ssh-gateway program."""
