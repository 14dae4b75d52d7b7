## Data and reference values for the survival sites of tests/ece/test_survival_populations.py
## (calib_ci("Surv(time, cens) ~ risk", by = "tgrade", horizon = 1826.25): each site's O/E, CITL and
## slope at 5 years and their random-effects meta-analysis).
##
## Usage (from the repository root):
##   Rscript tests/reference/gbsg_sites.R
## Writes tests/reference/gbsg_sites.csv and prints the reference numbers that the test pastes.
##
## Data: the German Breast Cancer Study Group 2 trial (Schumacher et al. 1994), as R's
## survival::gbsg (686 women): time = rfstime (recurrence-free survival, days), cens = status
## (1 recurrence or death), tgrade = tumour grade (I, II, III: the "sites"); risk = the 5-year risk
## (t = 1826.25 days) of a Cox model on hormon, age, size, nodes, pgr and er (not the grade, so that
## the grades differ in calibration): 1 - S(t | x) of survfit(coxph).  Written with 17 digits.
##
## Per site (th = pmin(time, t), dh = cens * (time <= t), cll = log(-log(1 - risk))):
##   * O/E = (1 - S_KM(t)) / mean(risk), se(log O/E) = Greenwood se of S(t) / (1 - S(t))
##     (summary(survfit(Surv(time, cens) ~ 1), times = t)$std.err is on the survival scale);
##   * CITL = log H_0(t) of coxph(Surv(th, dh) ~ offset(cll), ties = "breslow") (survfit at cll = 0),
##     se = se(H_0(t)) / H_0(t);
##   * slope = coef of coxph(Surv(th, dh) ~ cll, ties = "breslow"), its Wald se;
## then for each measure metafor::rma(yi, sei = se, method = "REML") (the method of meta_analysis()'s
## default), with a tight convergence threshold, and the prediction interval of Riley et al. (2011),
## b -+ qt(0.975, k - 2) sqrt(tau2 + se^2).

suppressPackageStartupMessages({library(survival); library(metafor)})
h <- 1826.25
g <- survival::gbsg
fit <- coxph(Surv(rfstime, status) ~ hormon + age + size + nodes + pgr + er, data = g)
risk <- 1 - as.numeric(summary(survfit(fit, newdata = g), times = h)$surv)
d <- data.frame(time = g$rfstime, cens = g$status, tgrade = c("I", "II", "III")[g$grade], risk = risk)
out <- d
out$risk <- sprintf("%.17g", out$risk)
write.csv(out, "tests/reference/gbsg_sites.csv", row.names = FALSE, quote = FALSE)
d <- read.csv("tests/reference/gbsg_sites.csv")  # the doubles the test reads

ctl <- coxph.control(eps = 1e-14, iter.max = 200, toler.chol = 1e-15)
sites <- c("I", "II", "III")
est <- data.frame(site = sites, oe = NA, se_log_oe = NA, citl = NA, se_citl = NA, slope = NA, se_slope = NA)
for (i in seq_along(sites)) {
  s <- d[d$tgrade == sites[i], ]
  s$th <- pmin(s$time, h); s$dh <- s$cens * (s$time <= h); s$cll <- log(-log(1 - s$risk))
  km <- summary(survfit(Surv(time, cens) ~ 1, data = s), times = h)
  obs <- 1 - km$surv
  est$oe[i] <- obs / mean(s$risk); est$se_log_oe[i] <- km$std.err / obs
  f0 <- coxph(Surv(th, dh) ~ offset(cll), data = s, ties = "breslow", control = ctl)
  s0 <- summary(survfit(f0, newdata = data.frame(cll = 0)), times = h)
  est$citl[i] <- log(s0$cumhaz); est$se_citl[i] <- s0$std.err / (s0$surv * s0$cumhaz)
  fs <- coxph(Surv(th, dh) ~ cll, data = s, ties = "breslow", control = ctl)
  est$slope[i] <- unname(coef(fs)); est$se_slope[i] <- unname(sqrt(vcov(fs)[1, 1]))
}
options(digits = 17)
print(est)
show <- function(name, yi, sei) {
  m <- rma(yi, sei = sei, method = "REML", control = list(threshold = 1e-12, maxiter = 1000))
  half <- qt(0.975, m$k - 2) * sqrt(m$tau2 + m$se^2)
  cat(sprintf("%s: b = %.17g, se = %.17g, ci = (%.17g, %.17g), tau2 = %.17g, pi = (%.17g, %.17g), QE = %.17g, I2 = %.17g\n",
              name, m$b[1], m$se, m$ci.lb, m$ci.ub, m$tau2, m$b[1] - half, m$b[1] + half, m$QE, m$I2))
}
show("log_oe", log(est$oe), est$se_log_oe)
show("citl", est$citl, est$se_citl)
show("slope", est$slope, est$se_slope)
cat(R.version.string, "survival", as.character(packageVersion("survival")), "metafor",
    as.character(packageVersion("metafor")), "\n")
