# Reference values for tests/test_flexible.py: R's rms::lrm(y ~ rcs(qlogis(p), 4)).
# Run from the repository root:  Rscript tests/reference/flexible_rms.R [OUT.json]
# Writes tests/reference/flexible_rms.json (or OUT.json).
suppressMessages(library(rms))
library(jsonlite)
one <- function(p, y, grid) {
  L <- qlogis(p)
  fit <- lrm(y ~ rcs(L, 4), tol = 1e-14, maxit = 50)
  knots <- attr(rcspline.eval(L, nk = 4), "knots")
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
out <- list(
  rms_version = as.character(packageVersion("rms")),
  demo = one(demo$p, demo$y, c(0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)),
  small = c(one(p_small, y_small, c(0.1, 0.3, 0.5, 0.7)), list(p = p_small, y = y_small))
)
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args)) args[1] else "tests/reference/flexible_rms.json"
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), path)
