"""Tests of the network frontends (tritonserver.frontends, the serve command)
with the real tritonclient against the real core (docs/serving.md)."""
