## Reference values of Uno's IPCW AUC at the horizon for tests/core/test_time_auc.py, from riskRegression.
##
## Usage (from the repository root):
##   Rscript tests/reference/survival_auc.R [OUTPUT.json]
## Input: tests/reference/survival_evidence_data.csv (written by survival_evidence_data.py).
## Default output: tests/reference/survival_auc.json
##
## For each data set (column `set`, horizon in column `horizon`):
##   Score(list(m = risk), formula = Hist(time, event) ~ 1, data = d, times = t, metrics = "auc",
##         null.model = FALSE, cens.model = "km")$AUC$score: AUC, se (sd of the influence function
##         over sqrt(n), the censoring model's influence included), lower, upper (Wald);
##   the same with conservative = TRUE (the censoring weights taken as known): se_conservative.

suppressPackageStartupMessages({library(riskRegression); library(survival); library(prodlim); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "tests/reference/survival_auc.json"
all <- read.csv("tests/reference/survival_evidence_data.csv")
res <- list(data_md5 = unname(tools::md5sum("tests/reference/survival_evidence_data.csv")),
            versions = list(R = R.version.string, riskRegression = as.character(packageVersion("riskRegression")),
                            prodlim = as.character(packageVersion("prodlim"))))
for (name in unique(all$set)) {
  d <- all[all$set == name, ]
  h <- d$horizon[1]
  sc <- Score(list(m = d$risk), formula = Hist(time, event) ~ 1, data = d, times = h, metrics = "auc",
              null.model = FALSE, cens.model = "km")$AUC$score
  cons <- Score(list(m = d$risk), formula = Hist(time, event) ~ 1, data = d, times = h, metrics = "auc",
                null.model = FALSE, cens.model = "km", conservative = TRUE)$AUC$score
  res[[name]] <- list(horizon = h, auc = sc$AUC, se = sc$se, lower = sc$lower, upper = sc$upper,
                      se_conservative = cons$se)
}
writeLines(toJSON(res, auto_unbox = TRUE, digits = NA, pretty = TRUE), out)
message("wrote ", out)
