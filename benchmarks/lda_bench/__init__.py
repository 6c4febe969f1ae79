"""The benchmark's measurements, targets and report.

It uses sparklda's public API only (:mod:`sparklda.api`, :mod:`sparklda.corpus`,
:mod:`sparklda.evaluation`, :mod:`sparklda.params`, :mod:`sparklda.training`,
:mod:`sparklda.kernels`, :mod:`sparklda.block`), so that it measures what a
user of the library gets.
"""
