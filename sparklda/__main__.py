"""``python -m sparklda train|infer|compare|generate ...`` (see :mod:`sparklda.cli`)."""

import sys

from sparklda.cli import main

if __name__ == "__main__":
    sys.exit(main())
