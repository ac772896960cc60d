
versions_output <- function(dir) {
  list(versions_csv = file.path(dir, "tables", "versions.csv"),
       versions_md = file.path(dir, "tables", "versions.md"),
       noise_csv = file.path(dir, "tables", "version_noise.csv"),
       noise_md = file.path(dir, "tables", "version_noise.md"),
       version_plot = file.path(dir, "plots", "tps_vs_memory_by_version.png"))
}

# Runs rule_versions() on a study; returns the output paths, what rule_versions() returned and
# the log's path.
run_versions <- function(sweep, baseline = list()) {
  dir <- tempfile("versions")
  output <- versions_output(dir)
  input <- write_db_sweep(sweep)
  jsonlite::write_json(PROVENANCE_VERSIONS, input$provenance, auto_unbox = TRUE)
  log <- file.path(dir, "versions.log")
  result <- rule_versions(input, output, list(axes = sweep$axes, baseline = baseline), log = log)
  list(output = output, result = result, log = log)
}

# The message of a not-applicable plot (empty_plot()), else NULL.
plot_message <- function(p) {
  if (length(p$layers) != 1) return(NULL)
  p$layers[[1]]$aes_params$label
}

# innodb (debian, 11.4) and postgresql (debian, 16, 17) over two memory sizes
# and binlog off / sync1, as config/studies/versions.yaml (on ext4): the cells a
# version of the other server family would have are not applicable and
# absent, and postgresql runs with binlog off only. On 11.4 the binary log
# costs 20% more than on debian.
make_versions_study <- function(storage = FALSE) {
  sweep <- make_version_sweep(
    list(engine = c("innodb", "postgresql"), version = c("debian", "16", "17", "11.4"),
         memory = c("1G", "64M"), filesystem = "ext4", threads = 8L,
         binlog = c("off", "sync1")),
    version_factors = c("11.4" = 1.1, "16" = 1.01, "17" = 1.3),
    binlog_factors = c("11.4:sync1" = 0.8), reps = 2L, storage = storage)
  runs <- function(dt) {
    mariadb <- dt$version %in% c("debian", "11.4")
    postgresql <- dt$version %in% c("debian", "16", "17") & dt$binlog %in% "off"
    is.na(dt$engine) | (dt$engine == "innodb" & mariadb) |
      (dt$engine == "postgresql" & postgresql)
  }
  sweep$summary <- sweep$summary[runs(sweep$summary)]
  sweep$samples <- sweep$samples[runs(sweep$samples)]
  sweep
}

test_that("versions sort debian first, then by their numbers part by part", {
  expect_equal(version_levels(c("17", "debian", "10.11.5", "11.4", "16", NA, "16")),
               c("debian", "10.11.5", "11.4", "16", "17"))
  expect_equal(version_levels(c("mybuild", "build-10", "16.1", "build-9", "16")),
               c("16", "16.1", "build-9", "build-10", "mybuild"))
  expect_equal(version_levels(c("15", "9.6", "Debian")), c("Debian", "9.6", "15"))
  expect_equal(version_levels(character()), character())
  dt <- data.table(version = c("17", "debian", "16"), memory = c("64M", "1G", "64M"),
                   x = 1:3)
  order_rows(dt, c("memory", "version"))
  expect_equal(dt$x, c(3L, 1L, 2L))
})

test_that("version table: median tps per version by memory and the ratios", {
  sweep <- make_version_sweep(list(engine = "postgresql", version = c("17", "15", "16"),
                                   memory = c("1G", "64M", "256M"), filesystem = "ext4",
                                   threads = 8L))
  tab <- versions_table(database_rows(sweep$summary), sweep$axes)
  expect_named(tab, c("memory", "15", "16", "17", "16/15", "17/15"))
  expect_equal(tab$memory, c("64M", "256M", "1G"))
  # three repetitions at 0.98, 1.02 and 1.0 times the cell's tps: the median
  expect_equal(tab$`15`, c(300, 600, 700))
  expect_equal(tab$`17`, c(390, 780, 910))
  expect_equal(tab$`16/15`, rep(1.01, 3))
  expect_equal(tab$`17/15`, rep(1.3, 3))
  expect_length(attr(tab, "group_by"), 0)
  expect_match(attr(tab, "preamble"), "Baseline version: 15.", fixed = TRUE)
  expect_match(attr(tab, "preamble"),
               "Same in every cell: engine = postgresql, filesystem = ext4, threads = 8.",
               fixed = TRUE)

  other <- versions_table(database_rows(sweep$summary), sweep$axes, list(version = "16"))
  expect_named(other, c("memory", "15", "16", "17", "15/16", "17/16"))
  expect_equal(other$`17/16`, rep(1.3 / 1.01, 3))
  # a baseline of another axis does not change the version's
  expect_named(versions_table(database_rows(sweep$summary), sweep$axes,
                              list(engine = "postgresql")),
               names(tab))
})

test_that("beyond noise: ranges apart and a difference over twice the spread", {
  expect_equal(noise_verdict(c(130, 131, 129), c(100, 101, 99)), "faster")
  expect_equal(noise_verdict(c(100, 101, 99), c(130, 131, 129)), "slower")
  # ranges overlap
  expect_equal(noise_verdict(c(100, 120), c(110, 130)), "within noise")
  # ranges apart, but the difference (11) is not over twice the spread (10)
  expect_equal(noise_verdict(c(115, 125), c(104, 114)), "within noise")
  expect_equal(noise_verdict(c(115, 125), c(99, 109)), "within noise")  # 16, not over 20
  expect_equal(noise_verdict(c(125, 135), c(100, 110)), "faster")  # 25 > 20
  # the larger spread counts
  expect_equal(noise_verdict(c(130, 131), c(100, 120)), "within noise")
  expect_equal(noise_verdict(130, c(100, 101)), "within noise")
  expect_equal(noise_verdict(numeric(), c(100, 101)), NA_character_)
})

test_that("a clearly faster version is beyond noise, a 1% one is not", {
  sweep <- make_version_sweep()
  summary <- database_rows(sweep$summary)
  noise <- version_noise_table(summary, sweep$samples, sweep$axes)
  expect_named(noise, c("memory", "version", "baseline", "tps", "tps_baseline",
                        "ratio", "verdict"))
  expect_equal(noise$memory, rep(c("64M", "256M", "1G"), each = 2))
  expect_equal(noise$version, rep(c("16", "17"), 3))
  expect_equal(unique(noise$baseline), "15")
  expect_equal(noise[version == "17", verdict], rep("faster", 3))
  expect_equal(noise[version == "16", verdict], rep("within noise", 3))
  expect_equal(noise$ratio, noise$tps / noise$tps_baseline)
  expect_equal(noise[version == "17", ratio], rep(1.3, 3), tolerance = 0.05)
  expect_false(any(attr(noise, "by_blocks")))
  expect_match(attr(noise, "preamble"), "Every comparison here is by repetitions.",
               fixed = TRUE)

  # tps: the median over repetitions of each repetition's median per-second tps
  cell <- sweep$samples[memory == "64M" & version == "17" & second >= 1L]
  expect_equal(noise[memory == "64M" & version == "17", tps],
               stats::median(cell[, stats::median(tps), by = rep]$V1))

  slower <- version_noise_table(summary, sweep$samples, sweep$axes, list(version = "17"))
  expect_equal(slower$version, rep(c("15", "16"), 3))
  expect_equal(unique(slower$verdict), "slower")
})

test_that("a single repetition is judged by blocks of its per-second series", {
  expect_equal(block_medians(1:10), c(1.5, 3.5, 5.5, 7.5, 9.5))
  expect_equal(block_medians(c(4, NA, 2, 6)), c(4, 2, 6))
  expect_length(block_medians(1:12), 5L)

  ripple <- c(-2, 1, 0, 2, -1, 1, -2, 0, 2, -1)
  series <- list(a = 100 + ripple, b = 130 + ripple, c = 101 + ripple)
  samples <- rbindlist(lapply(names(series), function(v) {
    data.table(version = v, rep = 1L, second = c(0L, seq_along(series[[v]])),
               tps = c(1, series[[v]]))  # second 0 is left out
  }))
  summary <- data.table(version = c("a", "b", "c"), rep = 1L, tps = c(100, 130, 101))
  noise <- version_noise_table(summary, samples, "version")
  expect_named(noise, c("version", "baseline", "tps", "tps_baseline", "ratio", "verdict"))
  expect_equal(noise$version, c("b", "c"))
  expect_equal(noise$verdict, c("faster", "within noise"))
  expect_equal(noise$tps, c(130, 101))
  expect_equal(noise$tps_baseline, c(100, 100))
  expect_true(all(attr(noise, "by_blocks")))
  expect_match(attr(noise, "preamble"), "all are by 5 blocks of the per-second series",
               fixed = TRUE)
})

test_that("versions are compared within an engine; binlog gets off/<binlog>", {
  sweep <- make_versions_study()
  summary <- database_rows(sweep$summary)
  tab <- versions_table(summary, sweep$axes)
  expect_equal(attr(tab, "group_by"), "engine")
  expect_named(tab, c("engine", "memory", "binlog", "debian", "11.4", "16", "17",
                      "11.4/debian", "16/debian", "17/debian"))
  innodb <- tab[engine == "innodb"]
  expect_equal(innodb$memory, c("64M", "64M", "1G", "1G"))
  expect_equal(innodb$binlog, c("off", "sync1", "off", "sync1"))
  expect_equal(innodb$debian, c(240, 160, 960, 640))
  expect_equal(innodb$`11.4/debian`, c(1.1, 0.88, 1.1, 0.88))
  expect_true(all(is.na(innodb$`17/debian`)))
  expect_equal(tab[engine == "postgresql", `17/debian`], c(1.3, 1.3))

  binlog <- binlog_versions_table(summary, sweep$axes)
  expect_named(binlog, c("engine", "version", "memory", "off", "sync1", "off/sync1"))
  expect_equal(binlog[engine == "innodb", version], c("debian", "debian", "11.4", "11.4"))
  expect_equal(binlog[engine == "innodb", `off/sync1`],
               c(1.5, 1.5, 1.5 / 0.8, 1.5 / 0.8))
  expect_true(all(is.na(binlog[engine == "postgresql", `off/sync1`])))

  output <- run_versions(sweep)$output
  csv <- fread(output$versions_csv, colClasses = list(character = c("engine", "memory")))
  expect_named(csv, names(tab))
  expect_equal(nrow(csv), 6L)
  md <- readLines(output$versions_md)
  expect_true(all(c("## tps by server version", "### engine=innodb",
                    "### engine=postgresql",
                    "| memory | binlog | debian | 11.4 | 11.4/debian |",
                    "| 64M | sync1 | 160 | 141 | 0.880 |",
                    "| memory | binlog | debian | 16 | 17 | 16/debian | 17/debian |",
                    "| 1G | off | 840 | 848 | 1,092 | 1.01 | 1.30 |",
                    "## no-binlog / binlog by server version",
                    "| version | memory | off | sync1 | off/sync1 |",
                    "| 11.4 | 1G | 1,056 | 563 | 1.87 |",
                    "One binlog value only here; no ratio.") %in% md))
  expect_match(md[3], "Baseline version: debian.", fixed = TRUE)
  expect_true(any(grepl("off/sync1: tps with binlog = off divided by", md, fixed = TRUE)))
})

test_that("an engine without the chosen baseline version uses its own first", {
  sweep <- make_versions_study()
  summary <- database_rows(sweep$summary)
  bases <- version_baselines(summary, sweep$axes, list(version = "16"))
  expect_equal(bases$engine, c("innodb", "postgresql"))
  expect_equal(bases$base, c("debian", "16"))
  expect_equal(bases$note[1], "engine innodb has no version 16; its baseline is debian.")
  tab <- versions_table(summary, sweep$axes, list(version = "16"))
  expect_true(all(c("11.4/debian", "debian/16", "17/16") %in% names(tab)))
  expect_match(attr(tab, "preamble"),
               "Baseline version: debian for innodb, 16 for postgresql. engine innodb has no version 16",
               fixed = TRUE)
  noise <- version_noise_table(summary, sweep$samples, sweep$axes, list(version = "16"))
  expect_equal(noise[engine == "postgresql", unique(version)], c("debian", "17"))
  expect_equal(noise[engine == "postgresql" & version == "17", unique(verdict)], "faster")
})

test_that("the rule writes the tables and the plot, and logs what it did", {
  run <- run_versions(make_versions_study())
  output <- run$output
  expect_true(all(file.exists(unlist(output))))

  noise <- fread(output$noise_csv, colClasses = list(character = "version"))
  expect_named(noise, c("engine", "memory", "binlog", "version", "baseline", "tps",
                        "tps_baseline", "ratio", "verdict"))
  expect_equal(nrow(noise), 8L)  # innodb: 11.4 x 4 settings; postgresql: 16, 17 x 2
  expect_true(all(noise$verdict %in% VERDICTS))
  expect_equal(noise[version == "17", unique(verdict)], "faster")
  expect_equal(noise[version == "16", unique(verdict)], "within noise")
  md <- readLines(output$noise_md)
  expect_match(md[1], "do not overlap", fixed = TRUE)
  expect_match(md[1], "split into 5 equal blocks", fixed = TRUE)
  expect_true(all(c("## Versions x settings", "## All comparisons",
                    "| memory | binlog | 16 | 17 |") %in% md))
  expect_true(any(grepl("^\\| 64M \\| off \\| within noise \\(1\\.0[0-9]\\) \\| faster \\(1\\.[23][0-9]\\) \\|$",
                        md)))
  expect_true(any(grepl("host dbhost", md)))

  p <- run$result$plot
  expect_null(plot_message(p))
  expect_equal(p$labels$y, "transactions/s")
  expect_match(p$labels$x, "^memory")
  expect_equal(p$labels$colour, "server version")
  expect_match(p$labels$caption, "PostgreSQL 15.8, 16.4, 17.0", fixed = TRUE)
  expect_equal(p$theme$legend.position, "bottom")
  expect_equal(levels(p$data$version), c("debian", "11.4", "16", "17"))
  expect_equal(levels(p$data$memory), c("64M", "1G"))
  expect_s3_class(p$facet, "FacetGrid")  # engine ~ binlog
  expect_equal(png_size(output$version_plot)[["width"]], 880)
  expect_gt(file.size(output$version_plot), 5000)

  log <- readLines(run$log)
  expect_match(log[1], "28 database repetitions (0 rows of other tools left out)",
               fixed = TRUE)
  expect_true("version values: debian, 11.4, 16, 17" %in% log)
  expect_true(any(grepl("^noise: 8 comparisons \\(faster [0-9]+, slower [0-9]+, within noise [0-9]+\\)",
                        log)))
  expect_equal(sink.number(), 0L)
})

test_that("the plot has min-max bars per version and memory by size", {
  sweep <- make_version_sweep(list(engine = "postgresql", version = c("17", "15", "16"),
                                   memory = c("1G", "64M", "256M")))
  dt <- version_plot_data(database_rows(sweep$summary), sweep$axes)
  expect_equal(levels(dt$memory), c("64M", "256M", "1G"))
  expect_equal(levels(dt$version), c("15", "16", "17"))
  setorder(dt, version, memory)
  expect_equal(dt$tps, c(300, 600, 700, 303, 606, 707, 390, 780, 910))
  expect_equal(dt$tps_min, 0.98 * dt$tps)
  expect_equal(dt$tps_max, 1.02 * dt$tps)
  expect_equal(dt$reps, rep(3L, 9))
  p <- plot_versions(database_rows(sweep$summary), sweep$axes, "cap")
  expect_null(p$facet$params$facets)  # nothing varies besides version and memory
  expect_equal(p$labels$subtitle,
               "sysbench's final tps, median over repetitions; bars show min and max; engine = postgresql")
})

test_that("storage cells in a version study are left out", {
  plain <- run_versions(make_versions_study())$output
  mixed_sweep <- make_versions_study(storage = TRUE)
  expect_true(any(is.na(mixed_sweep$summary$version)))
  mixed <- run_versions(mixed_sweep)
  for (name in c("versions_csv", "versions_md", "noise_csv", "noise_md")) {
    expect_identical(readLines(mixed$output[[name]]), readLines(plain[[name]]),
                     label = name)
  }
  expect_match(readLines(mixed$log)[1], "(2 rows of other tools left out)", fixed = TRUE)
  expect_false(anyNA(mixed$result$plot$data$version))
})

test_that("a study without a version axis, or with one version, says so", {
  expect_not_applicable <- function(sweep, message) {
    run <- run_versions(sweep)
    output <- run$output
    expect_true(all(file.exists(unlist(output))))
    for (name in c("versions_csv", "noise_csv")) {
      csv <- fread(output[[name]])
      expect_named(csv, c("status", "note"))
      expect_equal(csv$note, message)
    }
    for (name in c("versions_md", "noise_md")) {
      expect_equal(readLines(output[[name]])[1], message)
    }
    expect_equal(plot_message(run$result$plot), message)
    expect_gt(file.size(output$version_plot), 5000)
  }
  expect_not_applicable(make_db_sweep(), "not applicable: this study has no version axis")
  expect_not_applicable(make_version_sweep(list(engine = "postgresql", version = "16",
                                                memory = c("64M", "1G")), reps = 1L),
                        "not applicable: this study has no version axis")

  # a storage-only study
  sweep <- make_sweep(list(filesystem = "ext4", threads = c(1L, 4L)), reps = 1L,
                      duration = 3L)
  sweep$summary[, (DATABASE_SUMMARY_COLUMNS) := NA_real_]
  sweep$samples[, (DATABASE_SAMPLES_COLUMNS) := NA_real_]
  empty <- function(cols) {
    as.data.table(stats::setNames(rep(list(character()), length(cols)), cols))
  }
  sweep$system <- empty(c(sweep$axes, SYSTEM_COLUMNS))
  sweep$counters <- empty(c(sweep$axes, COUNTERS_COLUMNS))
  expect_not_applicable(sweep, NO_DATABASE_CELLS)
})

test_that("a study with a binlog axis of one value has no binlog ratio", {
  sweep <- make_version_sweep(list(engine = "postgresql", version = c("15", "17"),
                                   memory = "64M", binlog = "off"), reps = 2L)
  summary <- database_rows(sweep$summary)
  expect_match(binlog_versions_table(summary, sweep$axes)$note,
               "one binlog value (off)", fixed = TRUE)
  expect_null(binlog_versions_table(summary, setdiff(sweep$axes, "binlog")))
  tab <- versions_table(summary, sweep$axes)
  expect_named(tab, c("memory", "binlog", "15", "17", "17/15"))
})

test_that("a database repetition without a version stops, naming the cell", {
  sweep <- make_version_sweep(reps = 2L)
  sweep$summary[version == "16" & memory == "1G" & rep == 2L, version := NA]
  expect_error(versions_table(database_rows(sweep$summary), sweep$axes),
               "cell engine=postgresql, version=NA, memory=1G, filesystem=ext4, threads=8 rep 2: a database repetition without a version",
               fixed = TRUE)
})
