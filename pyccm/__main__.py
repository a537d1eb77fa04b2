"""`python -m pyccm` is the same as the `pyccm` console script."""

import sys

from pyccm.cli import main

sys.exit(main())
