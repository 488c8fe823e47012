"""Helpers shared by several test modules (not test modules themselves)."""
