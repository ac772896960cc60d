
# One repetition's per-second tps: a linear warm-up from 10% over `warmup`
# seconds, then `level` with 3% noise, and 0 in the `stalls` seconds.
synthetic_rep <- function(n = 300L, warmup = 60L, level = 1000,
                          stalls = integer(), seed = 1) {
  set.seed(seed)
  x <- level * stats::rnorm(n, 1, 0.03)
  if (warmup > 0) {
    x[seq_len(warmup)] <- seq(0.1 * level, level, length.out = warmup) *
      stats::rnorm(warmup, 1, 0.03)
  }
  x[stalls] <- 0
  data.table(cell = "a", rep = 1L, second = seq_len(n), tps = x)
}

test_that("a known warm-up and known stalls are found within tolerance", {
  for (seed in 1:20) {
    s <- synthetic_rep(warmup = 60L, stalls = c(120L, 121L, 200L, 250L, 251L, 252L),
                       seed = seed)
    w <- steady_windows(s, c("cell", "rep"), "tps")
    expect_true(w$steady, label = paste("seed", seed))
    expect_gte(w$window_start, 50L)
    expect_lte(w$window_start, 80L)
    expect_equal(w$window_end, 300L)
    expect_equal(w$stall_seconds, 6L)
    expect_equal(w$longest_stall_s, 3L)
    expect_equal(w$median, 1000, tolerance = 0.01)
  }
})

test_that("no warm-up keeps the whole series; the trim drops a fixed start", {
  s <- synthetic_rep(warmup = 0L)
  w <- steady_windows(s, c("cell", "rep"), "tps")
  expect_lte(w$window_start, 10L)
  flat <- data.table(cell = "a", rep = 1L, second = 1:100, tps = 7)
  w <- steady_windows(flat, c("cell", "rep"), "tps")
  expect_equal(c(w$window_start, w$window_s, w$stall_seconds), c(1, 100, 0))
  w <- steady_windows(flat, c("cell", "rep"), "tps",
                      stats_settings(list(trim_s = 30, steady_state = FALSE)))
  expect_equal(c(w$window_start, w$window_end), c(31, 100))
  expect_true(is.na(w$steady))
})

test_that("a series still climbing at its midpoint never reached steady state", {
  climbing <- data.table(cell = "a", rep = 1L, second = 1:200,
                         tps = seq(100, 2000, length.out = 200))
  w <- steady_windows(climbing, c("cell", "rep"), "tps")
  expect_false(w$steady)
  expect_equal(w$window_start, 101L)  # its second half
})

test_that("stalls use the stall share of the repetition's own median", {
  s <- synthetic_rep(warmup = 0L, stalls = 10:11)
  s[second == 50L, tps := 600]  # 60% of the median: not a stall at 0.5
  w <- steady_windows(s, c("cell", "rep"), "tps")
  expect_equal(w$stall_seconds, 2L)
  w <- steady_windows(s, c("cell", "rep"), "tps", stats_settings(list(stall_share = 0.7)))
  expect_equal(w$stall_seconds, 3L)
})

test_that("the CI of a constant series has zero width, by repetitions or blocks", {
  flat <- data.table(cell = rep(c("one", "three"), c(100L, 300L)),
                     rep = c(rep(1L, 100L), rep(1:3, each = 100L)),
                     second = c(1:100, rep(1:100, 3L)), tps = 500)
  w <- steady_windows(flat, c("cell", "rep"), "tps")
  cells <- cell_stats(window_samples(flat, w, c("cell", "rep"), "tps"), "cell", "tps")
  expect_equal(cells$ci_low, c(500, 500))
  expect_equal(cells$ci_high, c(500, 500))
  expect_equal(cells$sd, c(0, 0))
  expect_equal(cells$ci_method, c("bootstrap over 10 blocks of 10 s",
                                  "bootstrap over 3 repetitions"))
})

test_that("ci_method names the block length actually used (defect 2)", {
  # one repetition of 5 s: 5 blocks of 1 s, not "of 10 s" (block_s)
  s <- data.table(cell = c(rep("short", 5L), rep("long", 60L)), rep = 1L,
                  second = c(1:5, 1:60), tps = as.numeric(c(101:105, 101:160)))
  w <- steady_windows(s, c("cell", "rep"), "tps", stats_settings(list(steady_state = FALSE)))
  cells <- cell_stats(window_samples(s, w, c("cell", "rep"), "tps"), "cell", "tps")
  expect_equal(cells[cell == "short", ci_method], "bootstrap over 5 blocks of 1 s")
  expect_equal(cells[cell == "long", ci_method], "bootstrap over 6 blocks of 10 s")
  expect_equal(block_method(c(12, 25), c(5L, 5L)),
               c("bootstrap over 5 blocks of 2.4 s", "bootstrap over 5 blocks of 5 s"))
})

test_that("per-cell statistics have their known values", {
  # 3 repetitions of the seconds 1..100 shifted by 0, 10, 20
  s <- data.table(cell = "a", rep = rep(1:3, each = 100L),
                  second = rep(1:100, 3L), tps = rep(1:100, 3L) + rep(c(0, 10, 20), each = 100L))
  w <- steady_windows(s, c("cell", "rep"), "tps", stats_settings(list(steady_state = FALSE)))
  cells <- cell_stats(window_samples(s, w, c("cell", "rep"), "tps"), "cell", "tps")
  expect_equal(cells$median, 60.5)              # median of 50.5, 60.5, 70.5
  expect_equal(cells$mean, 60.5)
  expect_equal(cells$p5, stats::quantile(s$tps, 0.05, names = FALSE))
  expect_equal(cells$p25, stats::quantile(s$tps, 0.25, names = FALSE))  # the box of a box plot
  expect_equal(cells$p75, stats::quantile(s$tps, 0.75, names = FALSE))
  expect_equal(cells$p95, stats::quantile(s$tps, 0.95, names = FALSE))
  expect_equal(cells$rep_sd, 10)
  expect_equal(cells$rep_spread_pct, 100 * 20 / 60.5)
  # the bootstrap median of 3 values lies between the lowest and highest
  expect_gte(cells$ci_low, 50.5)
  expect_lte(cells$ci_high, 70.5)
  expect_lt(cells$ci_low, cells$ci_high)
})

test_that("identical distributions are within noise, far apart ones are not", {
  set.seed(3)
  a <- stats::rnorm(5, 1000, 20)
  expect_equal(compare_values(a, a)$verdict, "within noise")
  expect_equal(compare_values(a, sample(a))$verdict, "within noise")
  b <- stats::rnorm(5, 1000, 20)
  expect_equal(compare_values(a, b)$verdict, "within noise")
  far <- compare_values(a * 1.5, b)
  expect_equal(far$verdict, "higher")
  expect_gt(far$low, 1.3)
  expect_equal(compare_values(b, a * 1.5)$verdict, "lower")
})

test_that("ratios against the baseline cell carry a CI and a verdict", {
  set.seed(5)
  rows <- CJ(engine = c("innodb", "myrocks"), memory = c("64M", "1G"), rep = 1:3)
  rows[, level := fifelse(engine == "myrocks" & memory == "64M", 2000, 1000)]
  s <- rows[, .(second = 1:60, tps = level * stats::rnorm(60, 1, 0.02)),
            by = .(engine, memory, rep)]
  # at 1G both engines run the same per-second series: identical distributions
  s[engine == "myrocks" & memory == "1G", tps := s[engine == "innodb" & memory == "1G", tps]]
  keys <- c("engine", "memory", "rep")
  w <- steady_windows(s, keys, "tps")
  cells <- cell_stats(window_samples(s, w, keys, "tps"), c("engine", "memory"), "tps")
  r <- ratio_to_baseline(cells, c("engine", "memory"), "engine", "innodb")
  setkey(r, memory)
  expect_equal(r$memory, c("1G", "64M"))
  expect_equal(r$verdict, c("within noise", "higher"))
  expect_equal(r$ratio[2], 2, tolerance = 0.03)
  expect_true(all(r$ratio_low <= r$ratio & r$ratio <= r$ratio_high))
  expect_equal(unique(r$baseline), "innodb")
})

test_that("the bootstrap is reproducible and leaves the caller's random numbers alone", {
  set.seed(9)
  before <- stats::runif(1)
  set.seed(9)
  one <- bootstrap_medians(list(c(1, 2, 3, 10)), draws = 50)
  after <- stats::runif(1)
  expect_equal(after, before)
  expect_equal(bootstrap_medians(list(c(1, 2, 3, 10)), draws = 50), one)
  expect_true(all(one %in% c(1, 1.5, 2, 2.5, 3, 5.5, 6, 6.5, 10)))
})

test_that("run-to-run noise is pooled over the study's cells", {
  noise <- pooled_noise(list(c(100, 110), c(200, 220), 500))
  expect_equal(noise$df, 2L)
  expect_equal(noise$s, log(1.1) / sqrt(2))
  expect_equal(pooled_noise(list(5, 7))$df, 0L)
})

test_that("with 2 repetitions, pooled noise keeps identical cells within noise", {
  # 20 pairs of identical cells (2 repetitions each, 2% run-to-run noise): a
  # 95% interval should call about 1 of 20 pairs different, not a third
  set.seed(4)
  cells <- CJ(pair = 1:20, side = c("a", "b"))
  cells[, `:=`(m1 = 1000 * stats::rnorm(.N, 1, 0.02), m2 = 1000 * stats::rnorm(.N, 1, 0.02))]
  cells[, `:=`(median = (m1 + m2) / 2, rep_gmean = sqrt(m1 * m2), reps = 2L)]
  setattr(cells, "noise", pooled_noise(Map(c, cells$m1, cells$m2)))
  r <- ratio_to_baseline(cells, c("pair", "side"), "side", "a")
  expect_equal(nrow(r), 20L)
  expect_lte(sum(r$verdict != "within noise"), 3L)
  expect_match(r$test[1], "^t on log medians, run-to-run noise .*% pooled over the study \\(df 40\\)$")
  # the same cells 10% apart are told apart
  cells[side == "b", `:=`(median = median * 1.1, rep_gmean = rep_gmean * 1.1)]
  r <- ratio_to_baseline(cells, c("pair", "side"), "side", "a")
  expect_equal(unique(r$verdict), "higher")
})

test_that("at 3 to 10 repetitions identical cells are called different about 5% of the time, not 7-10%", {
  # the t interval is about the mean of the log medians: a ratio of the cells' medians tested with it
  # called 9.9% of comparisons of identical cells different at 5 repetitions (2,000 simulated studies)
  set.seed(11)
  alarms <- replicate(400, {
    m <- matrix(exp(stats::rnorm(8 * 5, 0, 0.05)), nrow = 8)
    values <- lapply(1:8, function(i) m[i, ])
    cells <- data.table(cell = sprintf("c%d", 1:8), median = vapply(values, stats::median, 0),
                        rep_gmean = vapply(values, geometric_mean, 0), reps = 5L)
    setattr(cells, "noise", pooled_noise(values))
    mean(ratio_to_baseline(cells, "cell", "cell", "c1")$verdict != "within noise")
  })
  expect_lt(mean(alarms), 0.07)
  expect_gt(mean(alarms), 0.03)
})

test_that("with repetitions the ratio is of the geometric means of the repetitions' medians", {
  cells <- data.table(cell = c("a", "b"), median = c(100, 120), rep_gmean = c(100, 110), reps = 3L)
  setattr(cells, "noise", pooled_noise(list(c(99, 100, 101), c(100, 120, 121))))
  expect_equal(ratio_to_baseline(cells, "cell", "cell", "a")$ratio, 1.1)
  expect_equal(geometric_mean(c(100, 120, 121)), exp(mean(log(c(100, 120, 121)))))
  expect_true(is.na(geometric_mean(c(100, 0))))
})

test_that("one repetition everywhere: the ratio CI comes from the block bootstrap", {
  flat <- data.table(cell = rep(c("a", "b"), each = 100L), rep = 1L,
                     second = rep(1:100, 2L), tps = rep(c(500, 600), each = 100L))
  w <- steady_windows(flat, c("cell", "rep"), "tps")
  cells <- cell_stats(window_samples(flat, w, c("cell", "rep"), "tps"), "cell", "tps")
  r <- ratio_to_baseline(cells, "cell", "cell", "a")
  expect_equal(c(r$ratio, r$ratio_low, r$ratio_high), c(1.2, 1.2, 1.2))
  expect_equal(r$verdict, "higher")
  expect_match(r$test, "^bootstrap of block medians")
})

test_that("the shared statistics leave out the cells with an analysis of their own", {
  summary <- data.table(workload = c("oltp", "ib", "oltp"), rep = c(1L, 1L, 2L),
                        tool = c("sysbench", "insert", "sysbench"),
                        kind = "database", per_second = c(1L, 0L, 1L))
  samples <- data.table(workload = c("oltp", "ib", "ib", "oltp"), rep = c(1L, 1L, 1L, 2L),
                        second = c(1L, 1L, 1L, 1L), tps = c(10, 20, 30, 40))
  kept <- per_second_cells(summary, samples, "workload")
  expect_equal(kept$summary$tool, c("sysbench", "sysbench"))
  expect_equal(kept$samples$tps, c(10, 40))
  only <- per_second_cells(summary[tool == "sysbench"], samples[workload == "oltp"], "workload")
  expect_equal(nrow(only$samples), 2L)
})

test_that("a round's smallest detectable difference is the half-width of the comparisons' CIs", {
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"), threads = c(1L, 4L), workload = "rndrd"),
                      reps = 3L, duration = 10L)
  # each repetition's level moves by a few percent, as on a noisy host
  shift <- sweep$summary[, .(filesystem, threads, rep, f = runif(.N, 0.9, 1.1))]
  sweep$samples[shift, iops := iops * i.f, on = c("filesystem", "threads", "rep")]
  r <- round_noise(copy(sweep$summary), copy(sweep$samples), sweep$axes, 3L)
  expect_equal(r$metric, "iops")
  expect_equal(r$cells, 4L)
  expect_equal(r$df, 8L)  # 4 cells x (3 - 1)
  s <- study_statistics(copy(sweep$summary), copy(sweep$samples), sweep$axes)
  iops <- s$comparisons[metric == "iops"]
  halves <- 100 * (sqrt(iops$ratio_high / iops$ratio_low) - 1)
  expect_true(nrow(iops) > 0)
  expect_equal(halves, rep(r$detectable_pct, length(halves)), tolerance = 1e-9)
  expect_equal(r$noise_pct, as.numeric(sub(".*noise ([0-9.]+)%.*", "\\1", iops$test[1])), tolerance = 0.01)
})

test_that("a round without a cell of two repetitions has no detectable difference", {
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"), threads = 1L, workload = "rndrd"), reps = 1L)
  r <- round_noise(copy(sweep$summary), copy(sweep$samples), sweep$axes, 1L)
  expect_equal(r$df, 0L)
  expect_true(is.na(r$detectable_pct))
  own <- copy(sweep$summary)[, per_second := 0L]  # a workload without per-second throughput
  expect_equal(nrow(round_noise(own, copy(sweep$samples), sweep$axes, 1L)), 0L)
})
