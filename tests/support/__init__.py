"""What the tests share: builders, simulator fixtures, polling and process helpers.

Test modules import helpers from here (`from tests.support.nodes import node`); fixtures
come to them through conftest files (the root `tests/conftest.py` loads
`tests.support.fixtures`). No module imports a conftest module
(tests/test_structure.py checks it).
"""
