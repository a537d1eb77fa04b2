"""`python -m pyccm_sim {kube,openstack}`: a simulator on its own."""

import sys

from pyccm_sim.cli import main

sys.exit(main())
