"""Where rows come from when they are not in memory: files, Dask frames, and the streaming accumulator.

Each backend ends in the same additive bin sums as the in-memory path
(:class:`~calibtest.BinAccumulator`), from which
:func:`calibtest.ece.build_result.result_from_stream` builds the result.
"""
