"""Train every mode on one corpus and compare: ``spark-submit jobs/compare_modes.py``
(the same as ``python -m sparklda compare``; see :mod:`sparklda.cli.compare`)."""

import sys

from sparklda.cli.compare import main

if __name__ == "__main__":
    sys.exit(main())
