"""A no-op rank (bench/ray_overhead.py)."""
