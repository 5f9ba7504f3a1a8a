"""A small shop's agents, tested with golden traces (see ../README.md)."""
