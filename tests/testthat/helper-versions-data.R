# Hand-built version studies (study 6) on top of make_db_sweep(): the same
# cells, with each version's throughput scaled. Loaded by testthat after
# helper-db-data.R.

# Repetition r's tps is the cell's times this factor: a spread of 4%, small
# enough that a 30% faster version is beyond noise and a 1% one is not.
VERSION_REP_FACTOR <- c(0.98, 1.02, 1.0)

# A study over the given axis values (as make_db_sweep(); include a version
# axis). version_factors: a version's tps over the baseline's (1 where not
# listed). binlog_factors: extra factors for "<version>:<binlog>" pairs, e.g.
# c("11.4:sync1" = 0.8), a binary log that costs more on one version.
# Summary tps and per-second tps are both scaled.
make_version_sweep <- function(values = list(engine = "postgresql",
                                             version = c("15", "16", "17"),
                                             memory = c("64M", "256M", "1G"),
                                             filesystem = "ext4",
                                             threads = 8L),
                               version_factors = c("16" = 1.01, "17" = 1.3),
                               binlog_factors = c(), reps = 3L,
                               duration = 10L, storage = FALSE, seed = 11) {
  sweep <- make_db_sweep(values, reps = reps, duration = duration, stall = NULL,
                         storage = storage, seed = seed)
  axes <- sweep$axes
  summary <- sweep$summary
  factor_of <- function(table, key) {
    if (!length(table)) return(rep(1, length(key)))
    f <- table[key]
    ifelse(is.na(f), 1, f)
  }
  f <- VERSION_REP_FACTOR[summary$rep] / DB_REP_FACTOR[summary$rep]
  if ("version" %in% axes) {
    f <- f * factor_of(version_factors, summary$version)
    if ("binlog" %in% axes) {
      f <- f * factor_of(binlog_factors, paste0(summary$version, ":", summary$binlog))
    }
  }
  summary[, .f := f]
  summary[tool == "sysbench", `:=`(tps = tps * .f, qps = qps * .f)]
  keys <- c(axes, "rep")
  sweep$samples[summary[tool == "sysbench"], `:=`(tps = tps * i..f, qps = qps * i..f),
                on = keys]
  summary[, .f := NULL]
  sweep$summary <- summary
  sweep
}

PROVENANCE_VERSIONS <- list(host = "dbhost", cpu = "Test CPU 9000 @ 3.0GHz",
                            kernel = "6.1.0-test-amd64", memory_gb = 15.6,
                            tools = list(sysbench = "sysbench 1.0.20",
                                         postgresql = "PostgreSQL 15.8, 16.4, 17.0"),
                            study = "versions")
