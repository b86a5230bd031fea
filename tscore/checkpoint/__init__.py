"""Checkpoints: reading and writing them, weight maps between frameworks, conversion and comparison."""
