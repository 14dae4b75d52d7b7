"""Monitoring a deployed model's calibration batch by batch (:class:`~calibtest.CalibrationMonitor`).

:mod:`calibtest.monitor.state` holds the settings, the additive batch sums and
the step that closes a look; :mod:`calibtest.monitor.batches` reads a batch
from memory, a file or a Dask frame; :mod:`calibtest.monitor.monitor` is the
public class; :mod:`calibtest.monitor.result` its frozen result and
:mod:`calibtest.monitor.plot` the plot.  The engines are in
:mod:`calibtest.core.sequential`.
"""
