# One comparison method: a study whose cells appear in comparisons.csv,
# engine_memory, binlog and versions tables gives the same ratio and the same
# verdict for the same pair in every table (the rules' own files, end to end).

test_that("every table gives the pair the same ratio and verdict as comparisons.csv", {
  sweep <- make_version_sweep(
    list(engine = c("innodb", "myrocks"), version = c("debian", "11.4"),
         memory = c("64M", "1G"), binlog = c("off", "sync1")),
    version_factors = c("11.4" = 1.3), reps = 2L)
  dir <- tempfile("verdict")
  input <- write_db_study(sweep, dir = dir)
  db <- list(engine_memory_csv = "engine_memory.csv", engine_memory_md = "engine_memory.md",
             binlog_csv = "binlog.csv", binlog_md = "binlog.md",
             efficiency_csv = "efficiency.csv", efficiency_md = "efficiency.md")
  db <- lapply(db, function(f) file.path(dir, f))
  rule_db_tables(input, db, list(axes = sweep$axes), log = file.path(dir, "db.log"))
  versions <- list(versions_csv = file.path(dir, "versions.csv"),
                   versions_md = file.path(dir, "versions.md"),
                   version_plot = file.path(dir, "versions.png"))
  rule_versions(input, versions, list(axes = sweep$axes), log = file.path(dir, "v.log"))

  text <- c("engine", "version", "memory", "binlog")
  read <- function(path) {
    fread(path, colClasses = list(character = intersect(text, names(fread(path, nrows = 0L)))))
  }
  comparisons <- read(input$comparisons_csv)[metric == "tps"]
  checked <- 0L
  check <- function(table, axis, value, base) {
    ratio <- paste0(value, "/", base)
    expect_true(ratio %in% names(table), label = ratio)
    others <- setdiff(intersect(names(table), sweep$axes), axis)
    for (i in seq_len(nrow(table))) {
      row <- table[i]
      hit <- comparisons$axis == axis & comparisons$axis_value == value
      for (a in others) hit <- hit & comparisons[[a]] == row[[a]]
      expect_equal(sum(hit), 1L)
      expect_equal(row[[ratio]], comparisons$ratio[hit], tolerance = 1e-6)
      expect_equal(row[[paste(ratio, "verdict")]], comparisons$verdict[hit])
      checked <<- checked + 1L
    }
  }
  # engine_memory.csv: sections by version and binlog, rows memory
  check(read(db$engine_memory_csv), "engine", "myrocks", "innodb")
  # versions.csv: sections by engine, rows memory x binlog
  check(read(versions$versions_csv), "version", "11.4", "debian")
  # the binlog table by memory (binlog.csv holds it without a filesystem axis)
  check(read(db$binlog_csv), "binlog", "sync1", "off")
  expect_equal(checked, 3L * 8L)
  # and the verdicts are not all alike: 11.4 is 30% faster
  expect_true(all(comparisons[axis == "version", verdict] == "higher"))
})

test_that("baseline_ratio is x / base, NA without a positive base, for a scalar base too", {
  expect_equal(baseline_ratio(c(1, 2, NA, 4), c(2, 0, 1, NA)), c(0.5, NA, NA, NA))
  expect_equal(baseline_ratio(c(2, 4, 6), 2), c(1, 2, 3))
  expect_equal(baseline_ratio(3, -1), NA_real_)
})
