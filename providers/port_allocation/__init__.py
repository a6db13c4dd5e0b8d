"""Stable public ssh ports for instances, decided from the previous allocation kept in stack state."""
