"""The numerical engines: numpy and scipy only, no result objects.

Layers, from the bottom: ``binning`` and ``simplex`` (cube and simplex cell
keys), ``targets`` (binary, top-1, top-k, full -> Z and U), ``null`` (sigma0^2
and the calibrated-regime test), ``binstats`` (bin sums, T, T_m, sigma1^2),
``partition`` (the row-to-bin assignment of one call, built once),
``intervals`` (the adjusted interval), ``conditional`` (the conditional and
Monte Carlo nulls), ``estimates`` (every estimate of Algorithm 1 from the
bin sums, in one bundle), ``resampling`` (bootstrap, subsampling, HulC), ``tcal``
(consistency resampling) and ``difference_variance`` (two-model comparison).
"""
