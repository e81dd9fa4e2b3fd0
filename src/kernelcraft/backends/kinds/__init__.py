"""One module per backend: the `Backend` subclass that says how that language is recognised, built and loaded.
The registry that lists them, in the order detection tries them, is backends/__init__.py."""
