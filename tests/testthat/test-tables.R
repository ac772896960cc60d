
# One repetition per row; the columns saturation_table() reads.
hand_summary <- function() {
  data.table(
    filesystem = c("ext4", "ext4", "ext4", "ext4", "ext4", "xfs", "xfs"),
    threads = c(4L, 1L, 16L, 1L, 4L, 8L, 2L),
    rep = c(1L, 1L, 1L, 2L, 2L, 1L, 1L),
    iops = c(20000, 7000, 60000, 7200, 22000, 30000, 12000),
    mibs = c(312.5, 109.375, 937.5, 112.5, 343.75, 468.75, 187.5),
    lat_mean_ms = c(0.3, 0.1, 1.0, 0.3, 0.5, 1.5, 0.5),
    lat_p95_ms = c(0.5, 0.2, 2.0, 0.4, 0.7, 3.0, 0.9),
    lat_p99_ms = c(0.9, 0.3, 4.0, NA, 1.1, 6.0, 1.5)
  )
}

tables_output <- function(dir) {
  list(cells_csv = file.path(dir, "cells.csv"),
       cells_md = file.path(dir, "cells.md"),
       saturation_csv = file.path(dir, "saturation.csv"),
       saturation_md = file.path(dir, "saturation.md"))
}

test_that("saturation is avg latency over the group's smallest thread count", {
  sat <- saturation_table(hand_summary(), c("filesystem", "threads"))
  expect_named(sat, c("filesystem", "threads", "iops", "mibs", "lat_mean_ms",
                      "lat_p95_ms", "lat_p99_ms", "saturation"))
  expect_equal(sat$filesystem, c("ext4", "ext4", "ext4", "xfs", "xfs"))
  expect_equal(sat$threads, c(1L, 4L, 16L, 2L, 8L))
  # means over reps: ext4 1 thread (0.1 + 0.3) / 2 = 0.2, 4 threads 0.4
  expect_equal(sat$lat_mean_ms, c(0.2, 0.4, 1.0, 0.5, 1.5))
  expect_equal(sat$iops, c(7100, 21000, 60000, 12000, 30000))
  expect_equal(sat$lat_p95_ms, c(0.3, 0.6, 2.0, 0.9, 3.0))
  expect_equal(sat$mibs, c(110.9375, 328.125, 937.5, 187.5, 468.75))
  expect_equal(sat$lat_p99_ms, c(0.3, 1.0, 4.0, 1.5, 6.0))  # a repetition without one left out
  # xfs has no 1-thread cell: its baseline is 2 threads
  expect_equal(sat$saturation, c(1, 2, 5, 1, 3))
})

test_that("saturation gives the device class's utilisation when a cell is on a class", {
  summary <- hand_summary()[, class_util_pct := ifelse(filesystem == "xfs", 50 * rep, NA_real_)]
  sat <- saturation_table(summary, c("filesystem", "threads"))
  expect_true("class_util_pct" %in% names(sat))
  expect_equal(sat[filesystem == "ext4", class_util_pct], c(NA_real_, NA_real_, NA_real_))
  expect_equal(sat[filesystem == "xfs", class_util_pct],
               summary[filesystem == "xfs", mean(class_util_pct), by = threads]$V1)
})

test_that("saturation gives iostat's r/s, w/s, queue size and %util over the measured seconds only", {
  summary <- hand_summary()[filesystem == "ext4" & threads %in% c(1L, 4L)]
  samples <- summary[, .(second = 1:3), by = .(filesystem, threads, rep)]
  # seconds 0 and below come before the window, 4 after the last sample; tmpfs has no device
  system <- CJ(filesystem = "ext4", threads = c(1L, 4L), rep = 1:2, second = -1:4)
  system[, `:=`(device = "loop0", r_s = 1000 * threads + 100 * rep + second,
                w_s = 10 * threads + second, aqu_sz = threads * 0.5, util = 10 * second)]
  system[second < 1L | second > 3L, `:=`(r_s = 1e9, w_s = 1e9, aqu_sz = 1e9, util = 1e9)]
  sat <- saturation_table(summary, c("filesystem", "threads"), system, samples)
  expect_named(sat, c("filesystem", "threads", "iops", "mibs", "lat_mean_ms", "lat_p95_ms",
                      "lat_p99_ms", "r_s", "w_s", "aqu_sz", "util_pct", "saturation"))
  # mean over seconds 1-3 (r_s 1000 t + 100 rep + 2), then over reps 1 and 2
  expect_equal(sat$r_s, c(1152, 4152))
  expect_equal(sat$w_s, c(12, 42))  # a write workload's writes/s beside the reads/s
  expect_equal(sat$aqu_sz, c(0.5, 2))
  expect_equal(sat$util_pct, c(20, 20))
  no_device <- copy(system)[, device := NA_character_]
  sat <- saturation_table(summary, c("filesystem", "threads"), no_device, samples)
  expect_true(all(is.na(sat$r_s)) && all(is.na(sat$util_pct)))
})

test_that("saturation without a threads axis counts every cell as 1 thread", {
  summary <- hand_summary()[, !"threads"]
  sat <- saturation_table(summary, "filesystem")
  expect_equal(sat$threads, c(1L, 1L))
  expect_equal(sat$saturation, c(1, 1))
  expect_false("threads" %in% names(summary))  # input left alone
})

test_that("saturation is NA, not Inf, when the baseline latency is missing", {
  summary <- hand_summary()[filesystem == "xfs"]
  summary[threads == 2L, lat_mean_ms := NA_real_]
  sat <- saturation_table(summary, c("filesystem", "threads"))
  expect_true(all(is.na(sat$saturation)))
})

test_that("a repetition with too few samples stops, naming the cell", {
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"), threads = c(1L, 4L)),
                      reps = 2L, duration = 10L)
  axes <- sweep$axes
  expect_silent(check_sample_counts(sweep$summary, sweep$samples, axes))

  # 8 of 10 seconds is exactly enough
  eight <- sweep$samples[!(filesystem == "xfs" & threads == 4L & rep == 2L &
                             second > 8L)]
  expect_silent(check_sample_counts(sweep$summary, eight, axes))

  seven <- sweep$samples[!(filesystem == "xfs" & threads == 4L & rep == 2L &
                             second > 7L)]
  expect_error(check_sample_counts(sweep$summary, seven, axes),
               "cell filesystem=xfs, threads=4 rep 2: 7 per-second samples",
               fixed = TRUE)

  # a repetition with no samples at all
  none <- sweep$samples[!(filesystem == "ext4" & threads == 1L & rep == 1L)]
  expect_error(check_sample_counts(sweep$summary, none, axes),
               "filesystem=ext4, threads=1 rep 1: 0 per-second samples",
               fixed = TRUE)

  # the summary's own count is checked too
  summary <- copy(sweep$summary)[filesystem == "ext4" & threads == 4L & rep == 1L,
                                 seconds := 5L]
  expect_error(check_sample_counts(summary, sweep$samples, axes),
               "filesystem=ext4, threads=4 rep 1: 5 per-second samples",
               fixed = TRUE)
})

test_that("samples that do not match the summary stop", {
  sweep <- make_sweep(list(filesystem = "ext4", threads = c(1L, 4L)), reps = 1L)
  axes <- sweep$axes
  dup <- rbind(sweep$samples, sweep$samples[1])
  expect_error(check_sample_counts(sweep$summary, dup, axes),
               "second 1 appears 2 times")
  orphan <- rbind(sweep$samples, copy(sweep$samples[1])[, rep := 9L])
  expect_error(check_sample_counts(sweep$summary, orphan, axes),
               "threads=1 rep 9: per-second samples but no row in summary",
               fixed = TRUE)
  zero <- copy(sweep$summary)[, duration_s := 0]
  expect_error(check_sample_counts(zero, sweep$samples, axes),
               "duration_s is 0")
  # no configured duration (fio until `size` is done): nothing to check against
  no_duration <- copy(sweep$summary)[, duration_s := NA_real_]
  expect_silent(check_sample_counts(no_duration, sweep$samples[second <= 2L], axes))
})

test_that("cells_table gives per-second and final statistics per cell", {
  axes <- c("filesystem", "threads")
  summary <- data.table(filesystem = "ext4", threads = 4L, rep = 1:2,
                        lat_mean_ms = c(0.2, 0.4), lat_p95_ms = c(0.5, 0.7),
                        lat_p99_ms = c(1, NA), lat_max_ms = c(48.2, 12))
  samples <- data.table(filesystem = "ext4", threads = 4L,
                        rep = rep(1:2, each = 5), second = rep(1:5, 2),
                        iops = as.numeric(1:10), mibs = as.numeric(11:20),
                        lat_ms = c(1, 2, 3, 4, 5, NA, NA, NA, NA, NA),
                        lat_pct_ms = c(NA, NA, NA, NA, NA, 6, 7, 8, 9, 10))
  cells <- cells_table(summary, samples, axes)
  expect_equal(nrow(cells), 1L)
  expect_equal(names(cells)[1:4], c("filesystem", "threads", "reps", "seconds"))
  expect_equal(cells$reps, 2L)
  expect_equal(cells$seconds, 10L)
  expect_equal(cells$persec_iops_mean, 5.5)
  expect_equal(cells$persec_iops_sd, sd(1:10))
  expect_equal(cells$persec_iops_p95, 9.55)
  expect_equal(cells$persec_iops_max, 10)
  expect_equal(cells$persec_mibs_mean, 15.5)
  # lat_ms where present, lat_pct_ms where lat_ms is NA
  expect_equal(cells$persec_lat_mean_ms, 5.5)
  expect_equal(cells$persec_lat_p95_ms, 9.55)
  expect_equal(cells$persec_lat_max_ms, 10)
  expect_equal(cells$lat_source, "lat_ms+lat_pct_ms")
  # the tool's own over the whole run: means over repetitions, the max the largest of any
  expect_equal(cells$lat_mean_ms, 0.3)
  expect_equal(cells$lat_p95_ms, 0.6)
  expect_equal(cells$lat_p99_ms, 1)
  expect_equal(cells$lat_max_ms, 48.2)
  # "p95 of per-second means" and "the tool's p95" never share a name
  expect_false(any(c("lat_ms_p95", "lat_ms_max", "iops_p95") %in% names(cells)))
})

test_that("cells_table keeps NA (not -Inf) when a cell has no latency", {
  sweep <- make_sweep(list(filesystem = "ext4", threads = 1L), reps = 1L,
                      duration = 3L)
  sweep$samples[, lat_pct_ms := NA_real_]
  cells <- cells_table(sweep$summary, sweep$samples, sweep$axes)
  expect_true(is.na(cells$persec_lat_mean_ms))
  expect_true(is.na(cells$persec_lat_max_ms))
  expect_true(is.na(cells$lat_source))
})

test_that("write_md_table writes a GitHub pipe table", {
  path <- tempfile(fileext = ".md")
  dt <- data.table(filesystem = c("ext4", "xfs"), threads = c(1L, 256L),
                   iops = c(7113.4, 131559), lat_mean_ms = c(0.14, NA),
                   note = c("a|b", "c"))
  write_md_table(dt, path, caption = "host h\ntools t")
  lines <- readLines(path)
  expect_equal(lines[1], "| filesystem | threads | iops | lat_mean_ms | note |")
  expect_equal(lines[2], "| :--- | ---: | ---: | ---: | :--- |")
  expect_equal(lines[3], "| ext4 | 1 | 7,113 | 0.140 | a\\|b |")
  expect_equal(lines[4], "| xfs | 256 | 131,559 | NA | c |")
  expect_true("_host h; tools t_" %in% lines)
})

test_that("write_md_table with group_by writes one table per group", {
  path <- tempfile(fileext = ".md")
  sat <- saturation_table(hand_summary(), c("filesystem", "threads"))
  write_md_table(sat, path, group_by = "filesystem", preamble = "Intro.")
  lines <- readLines(path)
  expect_equal(lines[1], "Intro.")
  expect_equal(grep("^### ", lines, value = TRUE),
               c("### filesystem=ext4", "### filesystem=xfs"))
  header <- "| threads | iops | mibs | lat_mean_ms | lat_p95_ms | lat_p99_ms | saturation |"
  expect_equal(sum(lines == header), 2L)
  expect_true("| 16 | 60,000 | 938 | 1.00 | 2.00 | 4.00 | 5.00 |" %in% lines)
  expect_equal(length(grep("^\\| [0-9]", lines)), 5L)
})

test_that("format_number is readable", {
  expect_equal(format_number(c(0.14, 0.1423, 1.95, 26.25, 99.99, 7113.2,
                               127841, NA)),
               c("0.140", "0.142", "1.95", "26.2", "100", "7,113", "127,841",
                 "NA"))
  expect_equal(format_number(c(1L, 256L)), c("1", "256"))
})

test_that("format_number separates thousands of every size, as formatC did within 32 bits", {
  expect_equal(format_number(c(-1000.4, 999.6, 1e6, -2147483647, 1234567890123, 1e15 + 2)),
               c("-1,000", "1,000", "1,000,000", "-2,147,483,647", "1,234,567,890,123",
                 "1,000,000,000,000,002"))
  x <- round(c(1000, 999999.5, 10^(3:9) + 1, -(10^(3:9) - 1)) * 1.37)
  expect_equal(format_number(x), formatC(round(x), format = "d", big.mark = ","))
})

test_that("inputs are read with text axes, integer threads, numeric metrics", {
  sweep <- make_sweep(list(filesystem = "ext4", threads = c(1L, 4L),
                           memory = c("05", "10")), reps = 1L, duration = 3L)
  input <- write_sweep(sweep)
  summary <- read_summary(input$summary, sweep$axes)
  expect_type(summary$threads, "integer")
  expect_type(summary$memory, "character")
  expect_setequal(summary$memory, c("05", "10"))
  expect_type(summary$fsyncs, "double")  # all NA in the file
  samples <- read_samples(input$samples, sweep$axes)
  expect_type(samples$lat_ms, "double")
  expect_equal(nrow(samples), nrow(sweep$samples))
  expect_error(read_summary(input$summary, c(sweep$axes, "engine")),
               "missing column\\(s\\) engine")
  expect_error(axes_param(list(axes = NULL)), "params\\$axes is empty")
})

test_that("the rule writes both tables and logs what it did", {
  sweep <- make_sweep()
  input <- write_sweep(sweep)
  dir <- tempfile("tables")
  output <- tables_output(dir)
  log <- file.path(dir, "log", "tables.log")
  rule_tables(input, output, list(axes = sweep$axes), log = log)

  expect_true(all(file.exists(unlist(output))))
  cells <- fread(output$cells_csv)
  expect_equal(nrow(cells), 12L)  # 2 filesystems x 3 threads x 2 modes
  expect_equal(names(cells)[1:6],
               c("filesystem", "threads", "workload", "mode", "reps", "seconds"))
  expect_true(all(cells$reps == 2L) && all(cells$seconds == 20L))
  expect_true(all(c("persec_iops_mean", "persec_iops_sd", "persec_iops_p95", "persec_iops_max",
                    "persec_mibs_mean", "persec_lat_mean_ms", "persec_lat_sd_ms", "persec_lat_p95_ms",
                    "persec_lat_max_ms", "lat_mean_ms", "lat_p95_ms",
                    "lat_p99_ms", "lat_max_ms") %in% names(cells)))
  cells_md <- readLines(output$cells_md)
  expect_match(cells_md[1], "^\\| filesystem \\| threads \\| workload \\| mode \\| reps")
  expect_equal(length(grep("^\\| (ext4|xfs) \\|", cells_md)), 12L)
  expect_true(any(grepl("host testhost", cells_md)))

  sat <- fread(output$saturation_csv)
  expect_equal(nrow(sat), 12L)
  expect_equal(sat[threads == 1L, saturation], rep(1, 4))
  expect_true(all(sat[threads == 16L, saturation] > 1))
  sat_md <- readLines(output$saturation_md)
  expect_equal(sum(grepl("^### ", sat_md)), 4L)
  expect_true("### filesystem=ext4, workload=rndrd, mode=async" %in% sat_md)

  expect_match(paste(readLines(log), collapse = "\n"),
               "24 repetitions, 240 per-second samples")
  expect_equal(sink.number(), 0L)  # the log was closed
})

test_that("the rule fails on a short repetition and writes no table", {
  sweep <- make_sweep(list(filesystem = "xfs", threads = c(1L, 4L)),
                      reps = 1L, duration = 10L)
  sweep$samples <- sweep$samples[!(threads == 4L & second > 5L)]
  input <- write_sweep(sweep)
  dir <- tempfile("tables")
  log <- file.path(dir, "tables.log")
  expect_error(rule_tables(input, tables_output(dir), list(axes = sweep$axes),
                    log = log),
               "cell filesystem=xfs, threads=4 rep 1: 5 per-second samples",
               fixed = TRUE)
  expect_equal(sink.number(), 0L)
  expect_false(file.exists(file.path(dir, "cells.csv")))
})

test_that("group headings name only the axes a group has a value for, never NA", {
  dt <- data.table(engine = c(NA, "innodb"), filesystem = c("ext4", "xfs"), tps = c(1, 2))
  lines <- md_table_lines(dt, c("engine", "filesystem"))
  headings <- grep("^###", lines, value = TRUE)
  expect_equal(headings, c("### filesystem=ext4", "### engine=innodb, filesystem=xfs"))
})
