"""The built-in engineer's kernel families, one folder each (family.py says what a family is; registry.py lists
them)."""
