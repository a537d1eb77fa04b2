"""Benchmarks: each script writes a table (markdown) and a plot under bench/out/."""
