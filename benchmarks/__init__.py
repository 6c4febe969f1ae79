"""sparklda's benchmark suite (not part of the installed library).

Run it with ``spark-submit benchmarks/run.py``; see ``benchmarks/README.md``.
"""
