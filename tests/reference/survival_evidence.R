## Reference values for tests/test_survival_evidence.py, from R's survival, riskRegression and rms.
##
## Usage (from the repository root):
##   Rscript tests/reference/survival_evidence.R [OUTPUT.json]
## Input: tests/reference/survival_evidence_data.csv (written by survival_evidence_data.py).
## Default output: tests/reference/survival_evidence.json
##
## For each data set (column `set`, horizon in column `horizon`) this records
##   * km: summary(survfit(Surv(time, event) ~ 1), times = t): 1 - S(t) and the
##     Greenwood standard error of S(t) (`std.err` of summary.survfit);
##   * oe: (1 - S(t)) / mean(risk) and exp(log(O/E) -/+ 1.96 * std.err / (1 - S(t)));
##   * slope: coxph(Surv(th, dh) ~ cloglog(risk), ties = "breslow"), th = pmin(time, t),
##     dh = event * (time <= t): coefficient and standard error;
##   * citl: coxph(Surv(th, dh) ~ offset(cloglog(risk)), ties = "breslow") and
##     survfit(fit, newdata = data.frame(cll = 0)): log H_0(t) and its standard error
##     (se of the cumulative hazard, std.err / S(t), over H_0(t)); and the same intercept as
##     glm(dh ~ offset(log(e)), poisson) on the rows with e_i > 0, e_i = exp(cll_i) H_0(th_i) / H_0(t);
##   * flexible: rms's default 3 knots of cloglog(risk) (rcspline.eval(nk = 3,
##     knots.only = TRUE)), coxph(Surv(th, dh) ~ rcspline.eval(cll, knots, inclx = TRUE),
##     ties = "breslow"), basehaz(centered = FALSE) at t, observed = 1 - exp(-H_0(t) exp(lp)),
##     ICI = mean |observed - risk|, E50 = median, E90 = quantile(0.9) (type 7), and the
##     Wald statistic of coef = (1, 0);
##   * groups: the risk groups (rows sorted by risk with R's stable order(), cut into
##     10 groups of equal size, the first n %% 10 one row larger):
##     summary(survfit(Surv(time, event) ~ grp, conf.type = "log-log"), times = t):
##     1 - S_g(t), Greenwood se, the log-log interval of the risk; mean risk;
##     the GND statistic of Demler, Paynter & Cook (2015) (their GND.calib:
##     sum (KM risk - mean risk)^2 / Greenwood variance, a group with variance 0
##     adding 0) and its chi-squared p-value with 9 df (G - 1, their reference);
##   * riskRegression: plotCalibration(Score(list(m = risk matrix), Hist(time, event) ~ 1,
##     times = t, plots = "calibration"), method = "quantile", q = 10,
##     cens.method = "local")$plotFrames: Pred and Obs per decile (the same groups
##     when no risk quantile falls on a tie).
## Coxph is run with eps = 1e-14 so that its coefficients are converged to well below 1e-6.

suppressPackageStartupMessages({
  library(survival); library(rms); library(riskRegression); library(jsonlite)
})

pdf(NULL)  # riskRegression opens a graphics device even with plot = FALSE: write no Rplots.pdf
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "tests/reference/survival_evidence.json"
all <- read.csv("tests/reference/survival_evidence_data.csv")
ctl <- coxph.control(eps = 1e-14, iter.max = 200, toler.chol = 1e-15)
z <- qnorm(0.975)
res <- list(data_md5 = unname(tools::md5sum("tests/reference/survival_evidence_data.csv")),
            versions = list(R = R.version.string, survival = as.character(packageVersion("survival")),
                            riskRegression = as.character(packageVersion("riskRegression")),
                            rms = as.character(packageVersion("rms"))))

for (name in unique(all$set)) {
  d <- all[all$set == name, ]
  h <- d$horizon[1]
  n <- nrow(d)
  d$th <- pmin(d$time, h)
  d$dh <- d$event * (d$time <= h)
  d$cll <- log(-log(1 - d$risk))
  r <- list(horizon = h, n = n)

  km <- summary(survfit(Surv(time, event) ~ 1, data = d), times = h)
  obs <- 1 - km$surv
  oe <- obs / mean(d$risk)
  se_log <- km$std.err / obs
  r$km <- list(observed = obs, se = km$std.err)
  r$oe <- list(oe = oe, se_log = se_log, lower = oe * exp(-z * se_log), upper = oe * exp(z * se_log))

  fs <- coxph(Surv(th, dh) ~ cll, data = d, ties = "breslow", control = ctl)
  r$slope <- list(slope = unname(coef(fs)), se = unname(sqrt(vcov(fs)[1, 1])))

  f0 <- coxph(Surv(th, dh) ~ offset(cll), data = d, ties = "breslow", control = ctl)
  s0 <- summary(survfit(f0, newdata = data.frame(cll = 0)), times = h)
  bh <- basehaz(f0, centered = FALSE)
  H0 <- stepfun(bh$time, c(0, bh$hazard))
  d$e <- exp(d$cll) * H0(d$th) / H0(h)
  pos <- d$e > 0  # rows followed only up to the first event time expect 0 and observe 0: no likelihood
  pg <- glm(dh ~ 1 + offset(log(e)), family = poisson, data = d[pos, ], control = glm.control(epsilon = 1e-14))
  # summary.survfit gives std.err on the survival scale: se(H_0) = std.err / surv
  r$citl <- list(citl = log(s0$cumhaz), se = s0$std.err / (s0$surv * s0$cumhaz), poisson = unname(coef(pg)))

  knots <- rcspline.eval(d$cll, nk = 3, knots.only = TRUE)
  X <- rcspline.eval(d$cll, knots = knots, inclx = TRUE)
  ff <- coxph(Surv(d$th, d$dh) ~ X, ties = "breslow", control = ctl)
  bf <- basehaz(ff, centered = FALSE)
  H0f <- max(bf$hazard[bf$time <= h])
  observed <- 1 - exp(-H0f * exp(drop(X %*% coef(ff))))
  dev <- coef(ff) - c(1, 0)
  diff <- abs(observed - d$risk)
  r$flexible <- list(knots = unname(knots), coef = unname(coef(ff)), ici = mean(diff), e50 = median(diff),
                     e90 = unname(quantile(diff, 0.9)), emax = max(diff),
                     wald = drop(t(dev) %*% solve(vcov(ff)) %*% dev), observed_head = observed[1:5])

  G <- 10
  sizes <- rep(n %/% G, G) + (seq_len(G) <= n %% G)
  grp <- integer(n)
  grp[order(d$risk)] <- rep(seq_len(G), sizes)
  d$grp <- grp
  sg <- summary(survfit(Surv(time, event) ~ grp, data = d, conf.type = "log-log"), times = h)
  kmvar <- sg$std.err^2
  mean_risk <- unname(tapply(d$risk, d$grp, mean))
  gnd <- sum(ifelse(kmvar == 0, 0, (1 - sg$surv - mean_risk)^2 / kmvar))
  r$groups <- list(observed = 1 - sg$surv, se = sg$std.err, lower = 1 - sg$upper, upper = 1 - sg$lower,
                   mean_risk = mean_risk, gnd = gnd, gnd_p = 1 - pchisq(gnd, G - 1))

  sc <- Score(list(m = matrix(d$risk, ncol = 1)), formula = Hist(time, event) ~ 1, data = d, times = h,
              plots = "calibration", metrics = "brier", null.model = FALSE, cens.model = "km")
  pc <- plotCalibration(sc, method = "quantile", q = G, cens.method = "local", plot = FALSE)$plotFrames$m
  r$riskRegression <- list(pred = unname(pc$Pred), obs = unname(pc$Obs))
  res[[name]] <- r
}
writeLines(toJSON(res, auto_unbox = TRUE, digits = NA, pretty = TRUE), out)
message("wrote ", out)
