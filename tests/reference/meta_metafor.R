## Reference values for tests/test_meta_analysis.py, from R's metafor::rma.
##
## Usage (from the repository root):
##   Rscript tests/reference/meta_metafor.R [OUTPUT.json]
## Default output: tests/reference/meta_metafor.json
##
## Reads tests/reference/meta_sites.csv (written by tests/reference/meta_sites.py:
## each set's site estimates yi and variances vi) and records, for every set,
## every tau^2 estimator (REML, DL, PM) and both tests (test = "z", the Wald
## interval; test = "knha", Hartung-Knapp):
##   rma(yi, vi, method = M, test = T, control = list(threshold = 1e-12, maxiter = 1000))
##   tau2, b (the pooled estimate), se, zval, pval, ci.lb, ci.ub, QE, QEp, I2 (percent), H2,
##   predict()'s pi.lb/pi.ub (metafor's default prediction interval: the test's critical
##   value) and the prediction interval of Riley et al. (2011),
##   b -+ qt(1 - alpha / 2, k - 2) * sqrt(tau2 + se^2), computed here from rma's b, se, tau2;
##   and rma with metafor's default control (threshold 1e-5) for REML, to show the
##   tight threshold moves nothing at the 1e-6 of the test.
## Numbers are written with 17 significant digits ("%.17g"), NA as null.

suppressPackageStartupMessages(library(metafor))

args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "tests/reference/meta_metafor.json"
sites <- read.csv("tests/reference/meta_sites.csv", stringsAsFactors = FALSE)

num <- function(x) if (is.null(x) || length(x) == 0 || is.na(x)) "null" else sprintf("%.17g", x)
fit_json <- function(fit, k) {
  pr <- predict(fit)
  half <- qt(0.975, k - 2) * sqrt(fit$tau2 + fit$se^2)
  riley <- if (k >= 3) c(fit$b[1] - half, fit$b[1] + half) else c(NA, NA)
  vals <- c(tau2 = fit$tau2, b = fit$b[1], se = fit$se, zval = fit$zval, pval = fit$pval, ci_lb = fit$ci.lb,
            ci_ub = fit$ci.ub, QE = fit$QE, QEp = fit$QEp, I2 = fit$I2, H2 = fit$H2, pi_lb = pr$pi.lb,
            pi_ub = pr$pi.ub, riley_lb = riley[1], riley_ub = riley[2])
  paste0("{", paste(sprintf('"%s": %s', names(vals), sapply(vals, num)), collapse = ", "), "}")
}

entries <- c()
for (set in unique(sites$set)) {
  d <- sites[sites$set == set, ]
  k <- nrow(d)
  for (method in c("REML", "DL", "PM")) {
    for (test in c("z", "knha")) {
      fit <- rma(d$yi, d$vi, method = method, test = test,
                 control = list(threshold = 1e-12, maxiter = 1000, tol = 1e-14))
      entries <- c(entries, sprintf('"%s/%s/%s": %s', set, method, test, fit_json(fit, k)))
    }
  }
  fit <- rma(d$yi, d$vi, method = "REML")
  entries <- c(entries, sprintf('"%s/REML/z/default-control": %s', set, fit_json(fit, k)))
}
header <- sprintf('"R": "%s", "metafor": "%s"', R.version.string, as.character(packageVersion("metafor")))
writeLines(paste0("{", header, ",\n", paste(entries, collapse = ",\n"), "}"), out)
