
versions_output <- function(dir) {
  list(versions_csv = file.path(dir, "tables", "versions.csv"),
       versions_md = file.path(dir, "tables", "versions.md"),
       version_plot = file.path(dir, "plots", "tps_vs_memory_by_version.png"))
}

# Runs rule_versions() on a study; returns the output paths, what rule_versions() returned and
# the log's path.
run_versions <- function(sweep, baseline = list()) {
  dir <- tempfile("versions")
  output <- versions_output(dir)
  input <- write_db_study(sweep, baseline)
  jsonlite::write_json(PROVENANCE_VERSIONS, input$provenance, auto_unbox = TRUE)
  log <- file.path(dir, "versions.log")
  result <- rule_versions(input, output, list(axes = sweep$axes), log = log)
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

# The rule run once on make_versions_study(), for the three tests that read it (the statistics rule and
# the plot are most of a test's time). The tests only read its files and objects.
versions_run <- local({
  run <- NULL
  function() {
    if (is.null(run)) run <<- run_versions(make_versions_study())
    run
  }
})

test_that("versions sort debian first, then by their numbers part by part", {
  expect_equal(axis_levels(c("17", "debian", "10.11.5", "11.4", "16", NA, "16"), "version"),
               c("debian", "10.11.5", "11.4", "16", "17"))
  expect_equal(axis_levels(c("mybuild", "build-10", "16.1", "build-9", "16"), "version"),
               c("16", "16.1", "build-9", "build-10", "mybuild"))
  expect_equal(axis_levels(c("15", "9.6"), "version"), c("9.6", "15"))
  expect_equal(axis_levels(character(), "version"), character())
  dt <- data.table(version = c("17", "debian", "16"), memory = c("64M", "1G", "64M"),
                   x = 1:3)
  order_by_axes(dt, c("memory", "version"))
  expect_equal(dt$x, c(3L, 1L, 2L))
})

test_that("version table: medians, ratios and verdicts of the statistics rule", {
  sweep <- make_version_sweep(list(engine = "postgresql", version = c("17", "15", "16"),
                                   memory = c("1G", "64M", "256M"), filesystem = "ext4",
                                   threads = 8L))
  summary <- database_rows(sweep$summary)
  stats <- db_stats(sweep)
  tab <- versions_table(summary, stats, sweep$axes)
  expect_named(tab, c("memory", "15", "16", "17", "16/15", "16/15 verdict", "17/15",
                      "17/15 verdict"))
  expect_equal(tab$memory, c("64M", "256M", "1G"))
  expect_equal(tab$`15`, c(300, 600, 700), tolerance = 0.05)
  expect_equal(tab$`17/15`, rep(1.3, 3), tolerance = 0.05)
  expect_equal(tab$`17/15 verdict`, rep("higher", 3))
  expect_equal(tab$`16/15 verdict`, rep("within noise", 3))
  cmp <- stats$comparisons[axis == "version" & metric == "tps" & axis_value == "17"]
  expect_equal(tab$`17/15`, cmp[match(tab$memory, memory), ratio])
  expect_match(attr(tab, "preamble"), "Baseline version: 15.", fixed = TRUE)
  expect_match(attr(tab, "preamble"),
               "Same in every cell: engine = postgresql, filesystem = ext4, threads = 8.",
               fixed = TRUE)

  other <- versions_table(summary, db_stats(sweep, list(version = "16")), sweep$axes)
  expect_true(all(c("15/16", "17/16") %in% names(other)))
  expect_equal(other$`17/16`, rep(1.3 / 1.01, 3), tolerance = 0.05)
})

test_that("versions are compared within an engine; binlog per version", {
  # the rule's own tables of make_versions_study(), of the statistics rule's tables as it reads them
  run <- versions_run()
  tab <- run$result$versions
  expect_equal(attr(tab, "group_by"), "engine")
  expect_equal(names(tab)[1:7], c("engine", "memory", "binlog", "debian", "11.4", "16", "17"))
  innodb <- tab[engine == "innodb"]
  expect_equal(innodb$memory, c("64M", "64M", "1G", "1G"))
  expect_equal(innodb$binlog, c("off", "sync1", "off", "sync1"))
  expect_equal(innodb$`11.4/debian`, c(1.1, 0.88, 1.1, 0.88), tolerance = 0.05)
  expect_true(all(is.na(innodb$`17/debian`)))
  expect_equal(tab[engine == "postgresql", `17/debian`], c(1.3, 1.3), tolerance = 0.05)

  binlog <- run$result$binlog
  expect_true(all(c("engine", "version", "memory", "off", "sync1", "sync1/off") %in% names(binlog)))
  expect_equal(binlog[engine == "innodb", version], c("debian", "debian", "11.4", "11.4"))
  expect_equal(binlog[engine == "innodb", `sync1/off`],
               c(1 / 1.5, 1 / 1.5, 0.8 / 1.5, 0.8 / 1.5), tolerance = 0.05)
  expect_true(all(is.na(binlog[engine == "postgresql", `sync1/off`])))

  output <- run$output
  csv <- fread(output$versions_csv, colClasses = list(character = c("engine", "memory")))
  expect_named(csv, names(tab))
  expect_equal(nrow(csv), 6L)
  md <- readLines(output$versions_md)
  expect_true(all(c("## tps by server version", "### engine=innodb",
                    "### engine=postgresql", "## binlog by server version",
                    "One binlog value only here; no ratio.") %in% md))
  expect_true(any(grepl("Baseline version: debian.", md, fixed = TRUE)))
})

test_that("the rule writes the table and the plot, and logs what it did", {
  run <- versions_run()
  output <- run$output
  expect_true(all(file.exists(unlist(output))))
  expect_true(any(grepl("host dbhost", readLines(output$versions_md))))

  p <- run$result$plot
  expect_null(plot_message(p))
  expect_equal(p$labels$y, "transactions/s")
  expect_match(p$labels$x, "^memory")
  expect_equal(p$labels$colour, "server version")
  expect_match(p$labels$caption, "PostgreSQL 15.8, 16.4, 17.0", fixed = TRUE)
  expect_equal(levels(p$data$version), c("debian", "11.4", "16", "17"))
  expect_equal(levels(p$data$memory), c("64M", "1G"))
  expect_s3_class(p$facet, "FacetGrid")  # engine ~ binlog
  expect_equal(png_size(output$version_plot)[["width"]], 880)

  log <- readLines(run$log)
  expect_match(log[1], "28 database repetitions", fixed = TRUE)
  expect_true("version values: debian, 11.4, 16, 17" %in% log)
  expect_equal(sink.number(), 0L)
})

test_that("storage cells in a version study are left out", {
  plain <- versions_run()$output
  mixed <- run_versions(make_versions_study(storage = TRUE))
  for (name in c("versions_csv", "versions_md")) {
    expect_identical(readLines(mixed$output[[name]]), readLines(plain[[name]]), label = name)
  }
  expect_false(anyNA(mixed$result$plot$data$version))
})

test_that("a study without a version axis, or with one version, says so", {
  expect_not_applicable <- function(sweep, message) {
    run <- run_versions(sweep)
    output <- run$output
    expect_true(all(file.exists(unlist(output))))
    csv <- fread(output$versions_csv)
    expect_named(csv, c("status", "note"))
    expect_equal(csv$note, message)
    expect_equal(readLines(output$versions_md)[1], message)
    expect_equal(plot_message(run$result$plot), message)
  }
  expect_not_applicable(make_db_sweep(), "not applicable: this study has no version axis")
  expect_not_applicable(make_version_sweep(list(engine = "postgresql", version = "16",
                                                memory = c("64M", "1G")), reps = 1L),
                        "not applicable: this study has no version axis")
})

test_that("a database repetition without a version stops, naming the cell", {
  sweep <- make_version_sweep(reps = 2L)
  sweep$summary[version == "16" & memory == "1G" & rep == 2L, version := NA]
  expect_error(versions_table(database_rows(sweep$summary), list(), sweep$axes),
               "cell engine=postgresql, version=NA, memory=1G, filesystem=ext4, threads=8 rep 2: a database repetition without a version",
               fixed = TRUE)
})
