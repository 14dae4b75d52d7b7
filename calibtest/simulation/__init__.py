"""The paper's simulated data (:mod:`~calibtest.simulation.settings`) and its simulation study (:mod:`~calibtest.simulation.study`).

>>> from calibtest import simulation as sim
>>> data = sim.setting1(n=1000, beta=0.5, rng=0)
>>> data.probs.shape, round(sim.true_ece_sq(1, 0.5, "binary"), 4)
((1000, 2), 0.0114)
"""
from calibtest.simulation.settings import (N_CLASSES, SimulatedData, paper_betas, setting1, setting2, setting3,
                                           true_ece_sq)

__all__ = ["SimulatedData", "paper_betas", "setting1", "setting2", "setting3", "true_ece_sq", "N_CLASSES"]
