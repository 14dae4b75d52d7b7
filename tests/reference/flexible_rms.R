# Reference values for tests/test_flexible.py: R's rms::lrm(y ~ rcs(qlogis(p), 4)).
# Run from the repository root:  Rscript tests/reference/flexible_rms.R [OUT.json]
# Writes tests/reference/flexible_rms.json (or OUT.json).
suppressMessages(library(rms))
library(jsonlite)
one <- function(p, y, grid) {
  L <- qlogis(p)
  # eps: lrm.fit stops when the deviance changes by less than eps (default 0.025); solve to convergence
  fit <- lrm(y ~ rcs(L, 4), tol = 1e-14, maxit = 100, eps = 1e-12)
  knots <- fit$Design$parms$L    # the knots rcs() chose (Hmisc rcspline.eval defaults)
  pr <- predict(fit, newdata = data.frame(L = qlogis(grid)), se.fit = TRUE)
  list(knots = unname(knots), coef = unname(coef(fit)), vcov = unname(as.matrix(vcov(fit))),
       grid = grid, lp = unname(pr$linear.predictors), se = unname(pr$se.fit))
}
demo <- read.csv("calibtest/data/demo.csv")
# a small simulated data set with a smooth miscalibration (n = 80 < 100: the outer knots are
# the 5th smallest and largest values)
set.seed(20261123)
x <- rnorm(80, -0.5, 1.2)
p_small <- plogis(x)
y_small <- rbinom(80, 1, plogis(0.3 + 0.7 * x + 0.15 * x^2))
# tied predictions (Hmisc's fractied rule and its fall-backs)
set.seed(7)
p_top <- c(rep(0.995, 300), runif(60, 0.3, 0.98))          # 83% at the largest value
y_top <- rbinom(length(p_top), 1, p_top^1.5)
p_ends <- c(rep(0.01, 40), runif(300, 0.05, 0.9), rep(0.95, 30))  # both ends tied
y_ends <- rbinom(length(p_ends), 1, plogis(0.2 + 0.8 * qlogis(p_ends)))
p_few <- sample(c(0.1, 0.2, 0.3, 0.4, 0.5, 0.6), 400, replace = TRUE)  # six distinct values
y_few <- rbinom(400, 1, p_few)
out <- list(
  rms_version = as.character(packageVersion("rms")),
  demo = one(demo$p, demo$y, c(0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)),
  small = c(one(p_small, y_small, c(0.1, 0.3, 0.5, 0.7)), list(p = p_small, y = y_small)),
  tied_top = c(one(p_top, y_top, c(0.4, 0.7, 0.9)), list(p = p_top, y = y_top)),
  tied_ends = c(one(p_ends, y_ends, c(0.1, 0.5, 0.9)), list(p = p_ends, y = y_ends)),
  few_values = c(one(p_few, y_few, c(0.15, 0.35, 0.55)), list(p = p_few, y = y_few))
)
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args)) args[1] else "tests/reference/flexible_rms.json"
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), path)
