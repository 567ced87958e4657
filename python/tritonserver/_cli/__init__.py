"""The command line's ``serve``: its flags and options (``serve_flags``),
shared by the two runners (``serve_local`` here, ``tritonserver.ray._command``
for ``--ray``), and the entry that picks one (``serve``)."""
