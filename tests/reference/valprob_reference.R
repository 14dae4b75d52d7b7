## Reference values for tests/test_validation_metrics.py, from R's rms::val.prob.
##
## Usage (from the repository root):
##   Rscript tests/reference/valprob_reference.R [OUTPUT.json]
## Default output: tests/reference/valprob_reference.json
##
## For each data set below whose file exists (paths relative to the repository
## root; the ../shared files are skipped when absent) this records
##   * val_prob: every statistic of rms::val.prob(p, y, pl = FALSE) (defaults:
##     lowess(p, y, iter = 0) smoother, f = 2/3, delta = 0.01 * diff(range(p)));
##   * glm_joint: glm(y ~ qlogis(p), binomial) coefficients, standard errors and
##     Wald 95% intervals (confint.default), i.e. the calibration intercept and
##     slope estimated together, as val.prob's lrm.fit(logit, y) does;
##   * glm_offset: glm(y ~ 1, offset = qlogis(p), binomial), the
##     calibration-in-the-large intercept with the slope fixed at 1, its
##     standard error and Wald 95% interval;
##   * somers2_C: Hmisc::somers2(p, y)["C"], the exact (unbinned) C index.
## Numbers are written with 17 significant digits ("%.17g"), NA as null.

suppressPackageStartupMessages(library(rms))  # attaches Hmisc too

args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "tests/reference/valprob_reference.json"

datasets <- list(
  demo = list(path = "calibtest/data/demo.csv", p = "p", y = "y"),
  cifar10_resnet50 = list(path = "../shared/data/tcal/cifar10_resnet50.csv",
                          p = "confidence", y = "correct"),
  cifar100_resnet56 = list(path = "../shared/data/tcal/cifar100_resnet56.csv",
                           p = "confidence", y = "correct")
)

num <- function(x) ifelse(is.na(x), "null", sprintf("%.17g", x))
obj <- function(x, indent) {
  pad <- strrep(" ", indent)
  body <- paste0(pad, "  \"", names(x), "\": ", vapply(x, num, ""), collapse = ",\n")
  paste0("{\n", body, "\n", pad, "}")
}
str_field <- function(x) paste0("\"", x, "\"")

blocks <- character(0)
for (name in names(datasets)) {
  ds <- datasets[[name]]
  if (!file.exists(ds$path)) {
    message("skipping ", name, ": ", ds$path, " not found")
    next
  }
  d <- read.csv(ds$path)
  p <- as.numeric(d[[ds$p]])
  y <- as.numeric(d[[ds$y]])
  lg <- qlogis(p)

  vp <- val.prob(p, y, pl = FALSE)
  vp <- setNames(as.numeric(vp), names(vp))

  fj <- glm(y ~ lg, family = binomial, control = glm.control(epsilon = 1e-14, maxit = 100))
  cj <- confint.default(fj, level = 0.95)
  sj <- sqrt(diag(vcov(fj)))
  joint <- c(intercept = unname(coef(fj)[1]), slope = unname(coef(fj)[2]),
             intercept_se = unname(sj[1]), slope_se = unname(sj[2]),
             intercept_ci_lower = cj[1, 1], intercept_ci_upper = cj[1, 2],
             slope_ci_lower = cj[2, 1], slope_ci_upper = cj[2, 2],
             deviance = deviance(fj), null_deviance = fj$null.deviance)

  fo <- glm(y ~ 1, offset = lg, family = binomial,
            control = glm.control(epsilon = 1e-14, maxit = 100))
  co <- confint.default(fo, level = 0.95)
  offset <- c(intercept = unname(coef(fo)[1]), intercept_se = sqrt(vcov(fo)[1, 1]),
              intercept_ci_lower = co[1, 1], intercept_ci_upper = co[1, 2])

  blocks <- c(blocks, paste0(
    "    \"", name, "\": {\n",
    "      \"path\": ", str_field(ds$path), ",\n",
    "      \"p_column\": ", str_field(ds$p), ",\n",
    "      \"y_column\": ", str_field(ds$y), ",\n",
    "      \"md5\": ", str_field(unname(tools::md5sum(ds$path))), ",\n",
    "      \"n\": ", length(y), ",\n",
    "      \"val_prob\": ", obj(vp, 6), ",\n",
    "      \"glm_joint\": ", obj(joint, 6), ",\n",
    "      \"glm_offset\": ", obj(offset, 6), ",\n",
    "      \"somers2_C\": ", num(unname(somers2(p, y)["C"])), "\n",
    "    }"))
}

json <- paste0(
  "{\n",
  "  \"generator\": \"tests/reference/valprob_reference.R\",\n",
  "  \"R_version\": ", str_field(R.version.string), ",\n",
  "  \"rms_version\": ", str_field(as.character(packageVersion("rms"))), ",\n",
  "  \"Hmisc_version\": ", str_field(as.character(packageVersion("Hmisc"))), ",\n",
  "  \"datasets\": {\n", paste(blocks, collapse = ",\n"), "\n  }\n}\n")
writeLines(json, out, sep = "")
message("wrote ", out)
