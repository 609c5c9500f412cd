"""The ``holon-ctx`` command line: argument parsing, I/O and rich rendering (the shell)."""
