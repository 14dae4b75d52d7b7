## Reference values for tests/test_validation_metrics.py: the loess calibration errors
## (E50, E90, ICI, Emax) and DeLong's interval of the C-statistic, from R.
##
## Usage (from the repository root):
##   Rscript tests/reference/loess_calibration.R [OUTPUT.json]
## Default output: tests/reference/loess_calibration.json
##
## CalibrationCurves::val.prob.ci.2 (which does not install on R 4.2) smooths with
##   Sm <- loess(y ~ p, degree = 2)        # span 0.75, gaussian, surface "interpolate"
## and the errors of Austin & Steyerberg (2019, Stat Med 38:4051) are
##   e <- abs(p - fitted(Sm)); E50 = median(e), E90 = quantile(e, 0.9) (type 7),
##   ICI = mean(e), Emax = max(e).
## This records them with R's default surface and with surface = "direct" (exact
## local fits), the loess fitted values at the k-d tree vertices (kd$vert, kd$xi,
## kd$vval), and pROC's DeLong interval: ci.auc(roc(y, p, direction = "<"), method = "delong").
## Data sets: the demo data, and the same with p rounded to 2 decimals (many ties).
## Numbers are written with 17 significant digits ("%.17g").

suppressPackageStartupMessages(library(pROC))

args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "tests/reference/loess_calibration.json"
d <- read.csv("calibtest/data/demo.csv")
sets <- list(demo = list(p = d$p, y = d$y), demo_rounded = list(p = round(d$p, 2), y = d$y))

num <- function(x) paste0("[", paste(sprintf("%.17g", x), collapse = ", "), "]")
errors <- function(fit, p) {
  e <- abs(p - fitted(fit))
  c(median(e), quantile(e, 0.9, names = FALSE, type = 7), mean(e), max(e))
}
blocks <- character(0)
for (name in names(sets)) {
  p <- sets[[name]]$p; y <- sets[[name]]$y
  fi <- loess(y ~ p, degree = 2)
  fd <- loess(y ~ p, degree = 2, control = loess.control(surface = "direct"))
  r <- roc(y, p, direction = "<", levels = c(0, 1), quiet = TRUE)
  ci <- ci.auc(r, method = "delong", conf.level = 0.95)
  blocks <- c(blocks, paste0(
    "    \"", name, "\": {\n",
    "      \"n\": ", length(p), ",\n",
    "      \"interpolate_e50_e90_ici_emax\": ", num(errors(fi, p)), ",\n",
    "      \"direct_e50_e90_ici_emax\": ", num(errors(fd, p)), ",\n",
    "      \"kd_vertices\": ", num(sort(c(fi$kd$vert, fi$kd$xi[fi$kd$a > 0]))), ",\n",
    "      \"auc_delong_lower_auc_upper_se\": ", num(c(ci[1], ci[2], ci[3], sqrt(var(r, method = "delong")))), "\n",
    "    }"))
}
json <- paste0("{\n  \"generator\": \"tests/reference/loess_calibration.R\",\n",
               "  \"R_version\": \"", R.version.string, "\",\n",
               "  \"pROC_version\": \"", as.character(packageVersion("pROC")), "\",\n",
               "  \"datasets\": {\n", paste(blocks, collapse = ",\n"), "\n  }\n}\n")
writeLines(json, out, sep = "")
message("wrote ", out)
