# Reference values for tests/test_survival.py: the Kaplan-Meier of the censoring distribution
# (reverse Kaplan-Meier) and the censoring survival G(T_i-) of Kaplan-Meier and of a Cox model (Breslow), by
# R's survival package.
# Run: Rscript tests/reference/survival_ipcw.R > tests/reference/survival_ipcw.json
suppressMessages({library(survival); library(jsonlite)})
set.seed(20251125)
n <- 120
x <- rnorm(n)
t_event <- rexp(n, 0.1 * exp(0.5 * x))
t_cens <- rexp(n, 0.05 * exp(0.7 * x))
# tied data (times rounded to one decimal) for the Kaplan-Meier comparison
time_tied <- round(pmin(t_event, t_cens), 1)
status_tied <- as.integer(t_event <= t_cens)
# an event and a censoring at the same time
time_tied[1:2] <- time_tied[3]; status_tied[1:3] <- c(0L, 1L, 0L)
fit <- survfit(Surv(time_tied, 1 - status_tied) ~ 1)
# G(T_i-): the reverse Kaplan-Meier at the knots strictly before each time
km_g_before <- c(1, fit$surv)[findInterval(time_tied, fit$time, left.open = TRUE) + 1]
# continuous data for the Cox model of the censoring (no ties: Breslow = Efron)
time <- pmin(t_event, t_cens)
status <- as.integer(t_event <= t_cens)
cox <- coxph(Surv(time, 1 - status) ~ x, ties = "breslow")
base <- basehaz(cox, centered = FALSE)
# G(T_i- | x_i) = exp(-H0(T_i-) exp(beta x_i)), H0(T_i-) the baseline cumulative hazard at the knots before T_i
h_before <- c(0, base$hazard)[findInterval(time, base$time, left.open = TRUE) + 1]
cox_g_before <- exp(-h_before * exp(coef(cox) * x))
cat(toJSON(list(
  call = "Rscript tests/reference/survival_ipcw.R",
  versions = list(survival = as.character(packageVersion("survival"))),
  time_tied = time_tied, status_tied = status_tied,
  km_times = fit$time, km_surv = fit$surv,
  km_g_before = km_g_before,
  time = time, status = status, x = x,
  cox_coef = unname(coef(cox)), cox_g_before = cox_g_before
), digits = NA, auto_unbox = TRUE))
