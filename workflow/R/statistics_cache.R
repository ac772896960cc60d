# Rule statistics' cache of per-cell figures (params cache: a folder), so that a study that gained or
# changed a few cells recomputes those cells, not all of them: adding one cell to a study of 10,000 cells
# read the whole 10 million samples again and redid every cell and comparison.
#
# What is kept (the last run's): in statistics.rds, per cell, its steady-state windows, per metric its
# cell_stats row, its per-repetition medians and the values its bootstrap draws from; per bootstrap
# comparison (one repetition: the CI depends on its two cells only), the CI of the ratio; the summary. In
# markdown.rds, the rows of each markdown table and their lines (statistics_md_memo()).
#
# When a cell's figure is read back rather than computed: only when everything it is computed from is as
# it was (a trust tool never serves a stale figure). A cell's key is its identity (the axes' values) and the
# fingerprint of its per-second rows (statistics_series.py: a hash of every value of every row, so a cell
# rerun with new data has a new key); its summary rows must be those of the last run (every column, an
# exact join: summary_as_before()). The whole cache's header is the settings, the axes, the series' and
# summary's columns, the analysis library's code (md5 of its files), R's and data.table's versions: a
# different header discards the cache. What depends on every cell is computed again each time from the
# per-cell parts: the run-to-run noise pooled over the study (so every t interval), the order of rows and
# metrics, the markdown tables (a line is read back only for a row equal, in every column, to one of the
# last run's). The tables are the same bytes as without the cache (tests/test_statistics_series.py
# compares them).

STATISTICS_CACHE_FORMAT <- 2L
STATISTICS_CACHE_FILE <- "statistics.rds"
STATISTICS_MD_FILE <- "markdown.rds"  # the markdown tables' rows and lines (statistics_md_memo())

# The analysis library's folder: library.R sources every file with the folder as working directory.
STATISTICS_LIBRARY <- if (file.exists("statistics_cache.R")) normalizePath(".") else NULL

# The cache's header: everything every cell's figures depend on besides its own inputs (NULL: the library's
# files are not found, so nothing is cached).
statistics_cache_header <- function(settings, axes, columns) {
  if (is.null(STATISTICS_LIBRARY)) return(NULL)
  files <- sort(list.files(STATISTICS_LIBRARY, "\\.R$", full.names = TRUE))
  code <- tools::md5sum(files)
  paste(c(paste("format", STATISTICS_CACHE_FORMAT), R.version.string,
          paste("data.table", as.character(utils::packageVersion("data.table"))),
          paste(basename(files), unname(code)), paste("axes:", paste(axes, collapse = "\t")),
          paste("columns:", paste(columns, collapse = "\t")), deparse(settings[order(names(settings))])),
        collapse = "\n")
}

# One key per cell of `cells` (.cell and the axes): its identity and fingerprint.
statistics_cell_keys <- function(cells, fingerprints, axes) {
  paste(identity_text(cells[, ..axes]), fingerprints, sep = "\n")
}

# Per cell of `cells` (.cell and the axes), TRUE when its rows of the summary `now` are those of `old` (the
# last run's), every column equal (NA to NA), as many, none twice: a join of the two tables (their keys as
# text, 17 digits a double, took 0.2 s for 10,000 cells). FALSE for every cell without `old` or when a
# column's type changed.
summary_as_before <- function(old, now, cells, axes) {
  if (is.null(old) || !identical(names(old), names(now)) || !identical(lapply(old, class), lapply(now, class))) {
    return(rep(FALSE, nrow(cells)))
  }
  rows <- positional(now)
  hit <- positional(old)[rows, on = names(rows), which = TRUE, mult = "first"]
  cell_now <- cells[now, on = axes, which = TRUE]  # NA: a cell without samples (not in the cache)
  cell_old <- cells[old, on = axes, which = TRUE]
  same <- tabulate(cell_now, nrow(cells)) == tabulate(cell_old, nrow(cells))
  changed <- cell_now[is.na(hit) | duplicated(hit)]  # a row not there before, or two rows for one
  same[changed[!is.na(changed)]] <- FALSE
  same
}

# The columns of dt (a data.table or list) named V1, V2, ...: a join on every column whatever their names
# (a name may hold what `on` reads as an operator).
positional <- function(dt) setnames(as.data.table(as.list(dt)), paste0("V", seq_along(dt)))

# What rule statistics reads from its cache and writes back: path (the file), header, keys (one per cell id
# of `source`), fresh (the ids of the cells to compute), cached (chunk_statistics()' shape: windows and
# per-metric parts of the cells read back, their attr cells the current ids), old_pairs (the cached bootstrap
# CIs of comparisons, in the current ids), pairs (an environment collecting this run's), settings. NULL
# without a folder or without fingerprints (samples.csv.gz, the tests' studies): everything is computed.
statistics_store <- function(folder, source, summary, axes, settings) {
  if (is.null(folder) || is.null(source$fingerprints)) return(NULL)
  header <- statistics_cache_header(settings, axes, c(source$columns, names(summary)))
  if (is.null(header)) return(NULL)
  keys <- statistics_cell_keys(source$cells, source$fingerprints, axes)
  path <- file.path(folder, STATISTICS_CACHE_FILE)
  old <- read_statistics_cache(path, header)
  entry <- if (is.null(old)) rep(NA_integer_, length(keys)) else match(keys, old$keys)
  entry[!summary_as_before(old$summary, summary, source$cells, axes)] <- NA_integer_
  entry[duplicated(entry, incomparables = NA)] <- NA_integer_  # not reached: keys hold the identity
  now <- function(old_ids) match(old_ids, entry)  # an old cell id -> its id now (NA: not read back)
  cached <- list(windows = NULL, parts = list(),
                 seconds = c(read = 0, check = 0, steady = 0, window = 0, cells = 0))
  old_pairs <- NULL
  if (!is.null(old)) {
    cached$windows <- old$windows[, .cell := now(.cell)][!is.na(.cell)]
    if (!nrow(cached$windows)) cached$windows <- NULL
    for (m in names(old$metrics)) {
      cached$parts[[m]] <- cached_part(old$metrics[[m]], now)
      if (!nrow(cached$parts[[m]])) cached$parts[[m]] <- NULL
    }
    old_pairs <- old$pairs[, `:=`(cell = now(cell), base = now(base))][!is.na(cell) & !is.na(base)]
  }
  pairs <- new.env()
  pairs$found <- list()
  list(path = path, header = header, keys = keys, fresh = which(is.na(entry)), cached = cached,
       old_pairs = old_pairs, pairs = pairs, settings = settings, summary = summary)
}

# The cache's file when its header is `header` (else NULL: made by other code or settings, or unreadable).
read_statistics_cache <- function(path, header) {
  if (!file.exists(path)) return(NULL)
  old <- tryCatch(readRDS(path), error = function(e) NULL)
  if (!is.list(old) || !identical(old$header, header)) return(NULL)
  setalloccol(old$windows)
  setalloccol(old$pairs)
  for (m in names(old$metrics)) setalloccol(old$metrics[[m]]$rows)
  old
}

# One metric's cached cells as a part of all_cell_stats() (attrs cells, rep_values, basis; no draws), the
# cells no longer read back left out.
cached_part <- function(metric, now) {
  ids <- now(metric$cells)
  keep <- which(!is.na(ids))
  out <- metric$rows[keep]
  attr(out, "cells") <- ids[keep]  # attr<-: data.table's setattr() would copy each value whole (joined_cell_stats())
  attr(out, "rep_values") <- metric$rep_values[keep]
  attr(out, "basis") <- metric$basis[keep]
  out
}

# ratio_to_baseline()'s `bounds` for one metric's part: the bootstrap CI of each ratio of rows to base_rows,
# read from the cache where both cells were read back (and were compared last time), else computed from
# their draws (attr draws, or drawn again from attr basis: each cell's bootstrap is seeded from its
# identity, so they are the same draws). Every pair's CI is kept for the next run.
store_bounds <- function(store, part, metric_name, axes, settings) {
  ids <- attr(part, "cells")
  function(rows, base_rows) {
    low <- high <- rep(NA_real_, length(rows))
    known <- rep(FALSE, length(rows))
    if (!is.null(store$old_pairs) && length(rows)) {
      hit <- store$old_pairs[data.table(metric = metric_name, cell = ids[rows], base = ids[base_rows]),
                             on = c("metric", "cell", "base"), which = TRUE, mult = "first"]
      known <- !is.na(hit)
      low[known] <- store$old_pairs$low[hit[known]]
      high[known] <- store$old_pairs$high[hit[known]]
    }
    todo <- which(!known)
    if (length(todo)) {
      draws <- attr(part, "draws")
      ci <- if (!is.null(draws)) {
        ratio_quantiles(draws, rows[todo], base_rows[todo], settings$level)
      } else {
        needed <- unique(c(rows[todo], base_rows[todo]))
        ids_text <- identity_text(part[needed, ..axes], metric_name)
        drawn <- bootstrap_medians(attr(part, "basis")[needed], settings$draws, settings$seed, ids_text)
        ratio_quantiles(drawn, match(rows[todo], needed), match(base_rows[todo], needed), settings$level)
      }
      low[todo] <- ci$low
      high[todo] <- ci$high
    }
    found <- store$pairs$found
    found[[length(found) + 1L]] <- data.table(metric = metric_name, cell = ids[rows], base = ids[base_rows],
                                              low = low, high = high)
    store$pairs$found <- found
    list(low = low, high = high)
  }
}

# Writes this run's per-cell figures (windows with .cell, joined_cell_stats()' parts, the pairs' CIs
# store_bounds() found) as the cache: written to a temporary file and renamed, so that a run stopped while
# writing leaves the last cache or none, never half of one.
save_statistics_store <- function(store, windows, cells) {
  parts <- attr(cells, "parts")
  metrics <- lapply(parts, function(part) {
    rows <- setDT(lapply(part, identity))  # the columns without the attributes (copy() would copy the draws)
    list(rows = rows, cells = attr(part, "cells"), rep_values = attr(part, "rep_values"),
         basis = attr(part, "basis"))
  })
  pairs <- rbindlist(c(list(data.table(metric = character(), cell = integer(), base = integer(), low = numeric(),
                                       high = numeric())), store$pairs$found))
  pairs <- unique(pairs, by = c("metric", "cell", "base"))  # a pair compared on two axes: not possible, kept once
  dir.create(dirname(store$path), recursive = TRUE, showWarnings = FALSE)
  tmp <- paste0(store$path, ".tmp", Sys.getpid())
  write_native_rds(list(header = store$header, keys = store$keys, summary = setDT(lapply(store$summary, identity)),
                        windows = copy(windows), metrics = metrics, pairs = pairs), tmp)
  file.rename(tmp, store$path)
  invisible(store$path)
}

# The markdown tables' lines of the last run, to reuse for rows that are as they were (one cell added to 10,000:
# formatting every number of cell_stats.md and comparisons.md again took 1.2 of the rule's 2.7 s). An
# environment: previous (per table name, list(rows, lines) read from the cache folder when its header is the
# store's), now (this run's, filled by memo_body_lines()), path, header. NULL without a store.
statistics_md_memo <- function(store) {
  if (is.null(store)) return(NULL)
  memo <- new.env()
  memo$path <- file.path(dirname(store$path), STATISTICS_MD_FILE)
  memo$header <- store$header
  old <- if (file.exists(memo$path)) tryCatch(readRDS(memo$path), error = function(e) NULL)
  memo$previous <- if (is.list(old) && identical(old$header, memo$header)) old$tables else list()
  memo$now <- list()
  memo
}

# md_body_lines(dt), each row that equals a row of the last run's table `name` (every column, the same classes:
# its line is a function of its values alone) taken from its lines; this run's kept in memo$now.
memo_body_lines <- function(dt, memo, name) {
  if (is.null(memo)) return(md_body_lines(dt))
  previous <- memo$previous[[name]]
  body <- if (is.null(previous) || !identical(names(previous$rows), names(dt)) ||
                !identical(lapply(previous$rows, class), lapply(dt, class)) || getNumericRounding() != 0L) {
    md_body_lines(dt)
  } else {
    reused_body_lines(dt, previous)
  }
  memo$now[[name]] <- list(rows = setDT(lapply(dt, identity)), lines = body)  # the columns, no attributes (draws)
  body
}

# md_body_lines(dt) where previous (list(rows, lines): a table of the same columns) has rows equal in every
# column (an exact join: NA matches NA), its lines; the others formatted.
reused_body_lines <- function(dt, previous) {
  at <- positional(previous$rows)[positional(dt), on = paste0("V", seq_along(dt)), which = TRUE, mult = "first"]
  body <- character(nrow(dt))
  hit <- !is.na(at)
  body[hit] <- previous$lines[at[hit]]
  if (!all(hit)) body[!hit] <- md_body_lines(dt[!hit])
  body
}

# Writes memo$now as the markdown cache (temporary file renamed, as save_statistics_store()).
save_statistics_md_memo <- function(memo) {
  if (is.null(memo)) return(invisible(NULL))
  dir.create(dirname(memo$path), recursive = TRUE, showWarnings = FALSE)
  tmp <- paste0(memo$path, ".tmp", Sys.getpid())
  write_native_rds(list(header = memo$header, tables = memo$now), tmp)
  file.rename(tmp, memo$path)
  invisible(memo$path)
}

# saveRDS(object, path, compress = FALSE) in R's native binary format rather than XDR: no byte swapping of
# every number (one cell added to 10,000: both caches written in 0.17 s instead of 0.30, statistics.rds read
# in 0.13 s instead of 0.21). readRDS() reads it; a cache carried to a machine of the other byte order is
# unreadable there, so read as none (read_statistics_cache(), statistics_md_memo()).
write_native_rds <- function(object, path) {
  con <- file(path, "wb")
  on.exit(close(con))
  serialize(object, con, xdr = FALSE)
  invisible(path)
}
