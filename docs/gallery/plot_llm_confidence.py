"""
An LLM's stated confidences
===========================

A language model answers multiple-choice questions and states how sure it is. Is its confidence
calibrated, i.e. among the answers given with confidence 0.8, are 80% right? Here the answers are
simulated (a model whose accuracy is 3 points below its stated confidence, as is common for
instruction-tuned models), so the example runs without a model; with your own run, ``correct``
holds 0/1 (was the answer right) and ``confidence`` the stated confidence of each answer.

This is **top-1 calibration** of a classifier with K answer options: ``calib_ci(y=correct,
probs=confidence, n_classes=K)``.
"""
# %%
# The data: 2000 questions with four options
# ------------------------------------------
# Confidences are often stated in steps (0.6, 0.7, ..., 1.0); a wrong answer at a stated
# confidence of exactly 1.0 has probability 0 under calibration.
import numpy as np

import calibtest as ct

rng = np.random.default_rng(7)
n, K = 2000, 4
levels = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]
confidence = rng.choice(levels, size=n, p=[.05, .1, .15, .2, .2, .15, .15])
correct = (rng.random(n) < confidence - 0.03).astype(int)  # overconfident
print(f"mean confidence {confidence.mean():.3f}, accuracy {correct.mean():.3f}")

# %%
# The interval, the test and the direction
# ----------------------------------------
# The conclusion says whether the model is overconfident (accuracy below confidence) or
# underconfident, with an interval for the difference.
res = ct.calib_ci(y=correct, probs=confidence, n_classes=K, rng=0)
print(res.summary())

# %%
# Its reliability diagram at display bins (deciles of confidence):
ax_reliability = res.plot_reliability()

# %%
# A certain refutation
# --------------------
# Add two wrong answers given at a stated confidence of 1.0. Under calibration they are
# impossible, whatever the bins: calibtest counts them and says that calibration is refuted,
# while the interval (which averages over bins) barely moves and says so.
confidence_1 = np.r_[confidence, 1.0, 1.0, np.ones(40)]
correct_1 = np.r_[correct, 0, 0, np.ones(40, dtype=int)]
res_1 = ct.calib_ci(y=correct_1, probs=confidence_1, n_classes=K, rng=0)
print(res_1.conclusion()[1])
