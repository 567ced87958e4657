"""Tests of one source area; see tests/README.md."""
