"""Train an LDA model: ``spark-submit jobs/train_lda.py --config conf/local.toml``
(the same as ``sparklda-train``; see :mod:`sparklda.cli.train`)."""

import sys

from sparklda.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
