"""Score documents with a trained model: ``spark-submit jobs/infer_topics.py --config
conf/warmstart.toml`` (the same as ``sparklda-infer``; see :mod:`sparklda.cli.infer`)."""

import sys

from sparklda.cli.infer import main

if __name__ == "__main__":
    sys.exit(main())
