"""An example out-of-tree tinygrad backend (device EXAMPLE)."""
