"""The root of the test tree: the shared fixtures of tests/support/fixtures.py for every
folder. Helpers are imported from tests.support; no module imports a conftest module."""

pytest_plugins = ["tests.support.fixtures"]
