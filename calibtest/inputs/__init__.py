"""What a call is given: the formula, the rows in memory, the argument checks, and the pre-specified analysis plan."""
