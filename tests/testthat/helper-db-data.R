# Small hand-built database studies, written the way the aggregate step writes
# them: summary, samples, system and counters, with storage cells mixed in
# when asked for. Loaded by testthat after helper-data.R.

# Final tps of repetition 1.5 (the median of reps 0.9x and 1.1x), by engine
# and memory: InnoDB gains with memory, MyRocks barely moves, as in study 4.
DB_TPS <- list(
  innodb = c("64M" = 200, "256M" = 500, "1G" = 800),
  myrocks = c("64M" = 450, "256M" = 500, "1G" = 550),
  postgresql = c("64M" = 300, "256M" = 600, "1G" = 700)
)
# Factors of the other axes' values (1 for values not listed).
DB_FACTORS <- c(xfs = 1.1, off = 1.2, sync0 = 1.1, sync1 = 0.8,
                sync1000 = 1.0, tuned = 2, unsafe = 3)
# Repetition r's tps is the cell's times this factor.
DB_REP_FACTOR <- c(0.9, 1.1, 1.0)

# The median tps a cell of make_db_sweep() has (its reps' median).
db_cell_tps <- function(engine = "innodb", memory = "256M", ...) {
  others <- unlist(list(...))
  factors <- DB_FACTORS[others]
  DB_TPS[[engine]][[memory]] * prod(factors[!is.na(factors)])
}

# A database study over the given axis values (a named list, in axis order;
# engine and memory default to innodb and 256M where the study has none).
# A summary row per repetition; per-second samples, system rows (vmstat and
# two iostat devices, 3 s before and 2 s after the measured window) and
# counters (datadir_bytes every 5 s, one server counter every second).
# stall: list(engine=, memory=, rep=, seconds=) whose per-second tps drop to 0.
# storage: add two sysbench-fileio cells with the database axes empty.
make_db_sweep <- function(values = list(engine = c("innodb", "myrocks"),
                                        memory = c("64M", "256M", "1G"),
                                        filesystem = "ext4",
                                        threads = 4L),
                          reps = 2L, duration = 10L,
                          stall = list(engine = "innodb", memory = "256M",
                                       rep = 1L, seconds = 5:6),
                          storage = FALSE, seed = 7) {
  set.seed(seed)
  axes <- names(values)
  grid <- do.call(CJ, c(values, list(rep = seq_len(reps), sorted = FALSE)))
  engine <- if ("engine" %in% axes) grid$engine else rep("innodb", nrow(grid))
  memory <- if ("memory" %in% axes) grid$memory else rep("256M", nrow(grid))
  other_axes <- setdiff(axes, c("engine", "memory", "threads"))
  tps <- vapply(seq_len(nrow(grid)), function(i) {
    others <- vapply(other_axes, function(a) as.character(grid[[a]][i]), "")
    do.call(db_cell_tps, c(list(engine[i], memory[i]), as.list(others)))
  }, 0) * DB_REP_FACTOR[grid$rep]
  mem_mb <- size_bytes(memory) / 2^20
  innodb <- engine == "innodb"
  summary <- data.table(
    grid,
    tool = "sysbench", kind = "database", per_second = 1L, duration_s = duration, seconds = duration,
    iops = NA_real_, read_iops = NA_real_, write_iops = NA_real_,
    mibs = NA_real_, fsyncs = NA_real_,
    tps = tps, qps = tps * 20, transactions = round(tps * duration),
    ignored_errors = 0, reconnects = 0,
    lat_mean_ms = 4000 / tps, lat_p95_ms = 9000 / tps,
    lat_p99_ms = 15000 / tps, lat_max_ms = 60000 / tps,
    hit_ratio = ifelse(innodb, 1 - 0.02 * 256 / mem_mb, 0.99),
    kb_read_per_txn = ifelse(innodb, 40 * 256 / mem_mb, 8),
    kb_written_per_txn = ifelse(innodb, 10 + 6 * 256 / mem_mb, 6),
    cpu_us_per_txn = ifelse(innodb, 900, 1400),
    datadir_mb_start = ifelse(innodb, 120, 40),
    datadir_mb_end = ifelse(innodb, 131, 44),
    memory_limit_mb = mem_mb + 512
  )
  keys <- c(axes, "rep")

  seconds <- seq_len(duration)
  samples <- summary[rep(seq_len(.N), each = duration), c(keys, "tps"), with = FALSE]
  samples[, second := rep(seconds, nrow(summary))]
  samples[, tps := tps * rnorm(.N, 1, 0.04)]
  if (length(stall)) {
    hit <- samples$second %in% stall$seconds & samples$rep == stall$rep
    if ("engine" %in% axes) hit <- hit & samples$engine == stall$engine
    if ("memory" %in% axes) hit <- hit & samples$memory == stall$memory
    samples[hit, tps := 0]
  }
  samples[, `:=`(time = 1.7e9 + second, iops = NA_real_, mibs = NA_real_,
                 qps = tps * 20, reads = tps * 14, writes = tps * 4,
                 other = tps * 2, lat_ms = NA_real_,
                 lat_pct_ms = 9000 / pmax(tps, 1), err_s = 0, reconn_s = 0,
                 queue = 0)]
  setcolorder(samples, c(keys, "second", "time", "iops", "mibs", "tps"))

  window <- seq(-2L, duration + 2L)
  cell <- summary[, c(keys), with = FALSE]
  cell[, `:=`(wa = ifelse(innodb, pmin(60, 15 * 256 / mem_mb), 3),
              us = ifelse(innodb, 20, 55), sy = ifelse(innodb, 8, 12))]
  system <- cell[rep(seq_len(.N), each = length(window) * 2L)]
  system[, `:=`(second = rep(rep(window, each = 2L), nrow(cell)),
                device = rep(c("vda", "vdb"), length(window) * nrow(cell)))]
  # idle before and after the window
  system[second < 1L | second > duration, `:=`(us = 1, sy = 1, wa = 0)]
  system[, `:=`(time = 1.7e9 + second, id = 100 - us - sy - wa, bi = 100,
                bo = 400, cs = 3000, r_s = 50, w_s = 80, rkb_s = 800,
                wkb_s = 3200, r_await = 0.4, w_await = 0.8, aqu_sz = 0.2,
                util = 30)]
  setcolorder(system, c(keys, setdiff(SYSTEM_COLUMNS, "rep")))

  sizes <- seq(-5L, duration, by = 5L)
  datadir <- summary[rep(seq_len(.N), each = length(sizes)),
                     c(keys, "datadir_mb_start", "datadir_mb_end"), with = FALSE]
  datadir[, second := rep(sizes, nrow(summary))]
  datadir[, value := (datadir_mb_start + (datadir_mb_end - datadir_mb_start) *
                        pmax(second, 0) / duration) * 2^20]
  datadir[, name := "datadir_bytes"]
  reads <- summary[rep(seq_len(.N), each = duration), c(keys), with = FALSE]
  reads[, `:=`(second = rep(seconds, nrow(summary)), name = "Innodb_buffer_pool_reads",
               value = 120)]
  counters <- rbind(datadir[, c(keys, "second", "name", "value"), with = FALSE],
                    reads)
  counters[, time := 1.7e9 + second]
  setcolorder(counters, c(keys, setdiff(COUNTERS_COLUMNS, "rep")))

  sweep <- list(axes = axes, summary = summary, samples = samples[],
                system = system[], counters = counters[])
  if (storage) sweep <- with_storage_cells(sweep, duration)
  sweep
}

# Adds two sysbench-fileio repetitions whose database axes are NA; their tps
# and per-second tps are NA, their iops set.
with_storage_cells <- function(sweep, duration) {
  axes <- sweep$axes
  db_axes <- setdiff(axes, c("filesystem", "threads", "workload"))
  row <- sweep$summary[1:2]
  for (a in db_axes) set(row, j = a, value = NA_character_)
  row[, `:=`(rep = 1:2, tool = "sysbench-fileio", kind = "storage", iops = 7000, tps = NA_real_,
             qps = NA_real_, transactions = NA_real_, hit_ratio = NA_real_,
             kb_read_per_txn = NA_real_, kb_written_per_txn = NA_real_,
             cpu_us_per_txn = NA_real_, datadir_mb_start = NA_real_,
             datadir_mb_end = NA_real_, memory_limit_mb = NA_real_)]
  keys <- c(axes, "rep")
  samples <- row[rep(1:2, each = duration), c(keys), with = FALSE]
  samples[, `:=`(second = rep(seq_len(duration), 2), time = 1.7e9,
                 iops = 7000, mibs = 109, tps = NA_real_)]
  system <- sweep$system[1:4]
  system[, (keys) := NULL]
  system <- cbind(row[rep(1:2, each = 2), c(keys), with = FALSE], system)
  system[, us := 90]  # would show in the CPU plot if it were kept
  sweep$summary <- rbind(sweep$summary, row)
  sweep$samples <- rbind(sweep$samples, samples, fill = TRUE)
  sweep$system <- rbind(sweep$system, system)
  sweep
}

PROVENANCE_DB <- list(host = "dbhost", cpu = "Test CPU 9000 @ 3.0GHz",
                      kernel = "6.1.0-test-amd64", memory_gb = 15.6,
                      tools = list(sysbench = "sysbench 1.0.20",
                                   innodb = "10.11.19-MariaDB-0+deb12u1",
                                   myrocks = "10.11.19-MariaDB-0+deb12u1"),
                      study = "innodb-vs-myrocks-memory")

# Writes a study as results/tables/ does; returns snakemake@input's fields.
write_db_sweep <- function(sweep, dir = tempfile("dbsweep")) {
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  input <- list(summary = file.path(dir, "summary.csv.gz"),
                samples = file.path(dir, "samples.csv.gz"),
                system = file.path(dir, "system.csv.gz"),
                counters = file.path(dir, "counters.csv.gz"),
                provenance = file.path(dir, "provenance.json"))
  for (name in c("summary", "samples", "system", "counters")) {
    fwrite(sweep[[name]], input[[name]])
  }
  jsonlite::write_json(PROVENANCE_DB, input$provenance, auto_unbox = TRUE)
  input
}

# The statistics rule's cells and comparisons of a study, as the tables that
# compare cells read them (read_statistics()).
db_stats <- function(sweep, baseline = list()) {
  s <- study_statistics(copy(sweep$summary), copy(sweep$samples), sweep$axes, baseline)
  list(cells = s$cells, comparisons = s$comparisons)
}

# write_db_sweep() and the statistics rule's tables beside: the input of the
# rules that read both.
write_db_study <- function(sweep, baseline = list(), dir = tempfile("dbsweep")) {
  input <- write_db_sweep(sweep, dir)
  names <- c("steady_state", "cell_stats_csv", "cell_stats_md", "comparisons_csv",
             "comparisons_md")
  files <- c("steady_state.csv", "cell_stats.csv", "cell_stats.md", "comparisons.csv",
             "comparisons.md")
  tables <- as.list(stats::setNames(file.path(dir, files), names))
  rule_statistics(input, tables, list(axes = sweep$axes, baseline = baseline),
                  log = file.path(dir, "statistics.log"))
  c(input, tables)
}
