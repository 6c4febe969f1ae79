"""sparklda: LDA topic models on Apache Spark (SCVB0, CVB0, CVB, SVB)."""

__version__ = "0.1.0"
