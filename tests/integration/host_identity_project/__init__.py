"""A Pulumi project of host identities only, driven through the real CLI by test_host_identity_pulumi.py."""
