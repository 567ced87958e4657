"""The compiled binding (``triton_bindings``); private to the package."""
