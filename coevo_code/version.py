"""The package's version, in a module that imports nothing: the Ray backend compares the
driver's with each node's without importing the package's public names."""

__version__ = "0.1.0"
