"""The l2-ECE estimate and its results: the result objects, the result built from bin sums, survival at a horizon, subgroups and their meta-analysis."""
