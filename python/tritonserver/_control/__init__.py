"""The room for what exists only because of the core's faults.

Everything here drives Triton core 2.51 (C API 1.34, the core of
nvidia-pytriton 0.5.13 to 0.7.0, the only one on PyPI) around a fault of
its own, and says in its docstring which versions it is for, so the room
can shrink when a newer core can be had:

- ``core_control``: CoreControl, the one interface Server calls: start
  (the startup plan), load, stop (unload all, wait for quiet).
- ``instances``: one core instance per model on the SDK backends (the
  teardown race of two or more instances), and the config Model.config shows.
- ``config_text``: config.pbtxt read without protobuf, for that rewrite.
- ``model_folder``: a model's folders, configuration and backend, found
  as the core finds them, read once per load for the modules here.
- ``load_reasons``: why a load failed, where the core says only that it did.
- ``python_stub``: python-backend models refused where the stub would get
  numpy 2 (it corrupts tensors).
- ``startup_models``: the models a start loads, as the core picks them.
- ``teardown``: servers a stop gave up on, freed at exit, and their stubs.

docs/architecture.md says what goes here; docs/reliability.md why.
"""
