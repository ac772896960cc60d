# Server versions side by side (study 6): median tps per version by memory
# with the ratio to a baseline version, the binary log's cost on each version,
# which differences are beyond run-to-run noise, and tps against memory with
# one line per version.
#
# Snakemake: input summary, samples (+ optional provenance; system and
# counters may be given and are not read); output versions_csv, versions_md,
# noise_csv, noise_md, version_plot; params axes, baseline (axis -> value, may
# be empty; version = the baseline version); log.
#
# Rows of other tools (storage cells, whose version is NA) are left out.
# Versions are compared within one engine: "debian" is MariaDB 10.11 for
# innodb and PostgreSQL 15 for postgresql. The baseline version is
# params$baseline$version, else the first version in order ("debian" first,
# then numbers part by part: 10.11.5 < 11.4 < 16 < 17, then builds' names);
# an engine that did not run params$baseline$version is compared with its own
# first version, and the preamble says so.
#
# versions.csv holds the version table of versions.md (rows memory [x binlog],
# one column per version, "<version>/<baseline>" ratios), sections' axes
# first. versions.md adds, when the binlog axis has two values or more, the
# no-binlog / binlog table: rows version x memory, one column per binlog
# value, "off/<binlog>" ratios.
#
# Every output is written. When the study has no version axis, or only one
# version, the tables have columns status ("not applicable") and note ("not
# applicable: this study has no version axis") and the plot says so.

# Per-second series of a single repetition are split into this many blocks.
NOISE_BLOCKS <- 5L
# A difference is beyond noise when it exceeds this many within-cell spreads.
NOISE_SPREADS <- 2
# The version value of Debian's own packages; it comes first.
DEBIAN_VERSION <- "debian"

VERDICTS <- c("faster", "slower", "within noise")
NOISE_COLUMNS <- c("version", "baseline", "tps", "tps_baseline", "ratio", "verdict")

VERSION_TITLE <- "server version"

# ---------------------------------------------------------------------------
# Order of versions

# Text whose runs of digits compare as numbers: "10.11.5" < "11.4" < "16" and
# "build-9" < "build-10" (digits pad to 20 places; digits sort before letters).
version_key <- function(x) {
  parts <- regmatches(x, gregexpr("[0-9]+|[^0-9]+", x))
  vapply(parts, function(p) {
    digits <- grepl("^[0-9]", p)
    p[digits] <- paste0(strrep("0", pmax(0, 20 - nchar(p[digits]))), p[digits])
    paste(p, collapse = "")
  }, "")
}

# The distinct versions (NA left out) in reading order: "debian" first, then
# numbers part by part, then other names.
version_levels <- function(x) {
  values <- unique(as.character(x[!is.na(x)]))
  if (length(values) == 0) return(character())
  debian <- values[tolower(values) == DEBIAN_VERSION]
  rest <- setdiff(values, debian)
  c(debian, rest[order(version_key(rest), rest, method = "radix")])
}

# The levels of an axis's values in reading order, versions included.
levels_of <- function(x, axis) {
  if (axis == "version") version_levels(x) else axis_levels(x, axis)
}

# Axis columns as factors in reading order (version too), and back.
with_version_factors <- function(dt, cols) {
  dt <- with_axis_factors(dt, setdiff(cols, "version"))
  if ("version" %in% cols) {
    set(dt, j = "version", value = factor(as.character(dt$version),
                                         levels = version_levels(dt$version)))
  }
  dt
}

# Sorts dt in place by the given columns, each in reading order (NA last).
order_rows <- function(dt, cols) {
  if (length(cols) == 0 || nrow(dt) == 0) return(invisible(dt))
  ranks <- paste0(".rank_", seq_along(cols))
  for (i in seq_along(cols)) {
    x <- dt[[cols[i]]]
    set(dt, j = ranks[i], value = match(as.character(x), levels_of(x, cols[i])))
  }
  setorderv(dt, ranks, na.last = TRUE)
  dt[, (ranks) := NULL]
  invisible(dt)
}

# ---------------------------------------------------------------------------
# What the study has

# Why the study cannot compare versions (a not-applicable message), or NULL.
# Stops on database repetitions without a version in a study with the axis.
versions_not_applicable <- function(summary, axes) {
  if (nrow(summary) == 0) return(NO_DATABASE_CELLS)
  if (!"version" %in% axes) return(not_applicable("version"))
  unknown <- summary[is.na(version)]
  if (nrow(unknown)) {
    stop(sprintf(paste0("cell %s rep %d: a database repetition without a version ",
                        "in a study with a version axis. %d repetition(s) like this."),
                 cell_name(unknown[1], axes), unknown$rep[1], nrow(unknown)))
  }
  if (uniqueN(summary$version) < 2) return(not_applicable("version"))
  NULL
}

# The baseline version of each engine (one row, engine NA, without an engine
# axis): params$baseline$version where the engine ran it, else the engine's
# first version. note says where the baseline had to be replaced.
version_baselines <- function(summary, axes, baseline = list()) {
  chosen <- if ("version" %in% names(baseline)) {
    as.character(unlist(baseline[["version"]]))[1]
  }
  by <- intersect("engine", axes)
  engines <- if (length(by)) axis_levels(summary$engine, "engine") else NA_character_
  rbindlist(lapply(engines, function(e) {
    versions <- version_levels(if (is.na(e)) summary$version else
                                 summary[engine == e, version])
    ok <- length(chosen) == 1 && !is.na(chosen) && chosen %in% versions
    note <- if (length(chosen) == 1 && !is.na(chosen) && !ok) {
      sprintf("%shas no version %s; its baseline is %s.",
              if (is.na(e)) "" else sprintf("engine %s ", e), chosen, versions[1])
    } else {
      NA_character_
    }
    data.table(engine = e, base = if (ok) chosen else versions[1], note = note)
  }))
}

# Adds column base (the baseline version of the row's engine) to dt.
add_baseline_column <- function(dt, bases) {
  if (nrow(bases) == 1 && is.na(bases$engine)) {
    dt[, base := bases$base]
  } else {
    dt[bases, base := i.base, on = "engine"]
  }
  dt
}

baseline_sentence <- function(bases) {
  said <- if (nrow(bases) == 1 || uniqueN(bases$base) == 1) {
    sprintf("Baseline version: %s.", bases$base[1])
  } else {
    sprintf("Baseline version: %s.",
            paste(sprintf("%s for %s", bases$base, bases$engine), collapse = ", "))
  }
  paste(c(said, stats::na.omit(bases$note)), collapse = " ")
}

same_sentence <- function(dt, axes) {
  fixed <- fixed_axes_text(dt, axes)
  if (length(fixed)) sprintf("Same in every cell: %s.", fixed)
}

# ---------------------------------------------------------------------------
# Version table (study 6)

# Long to wide: one row per combination of `rows` (reading order), one column
# per value of `col` (reading order); rows' columns keep their type.
pivot_wide <- function(dt, rows, col, value) {
  dt <- with_version_factors(dt, c(rows, col))
  lhs <- if (length(rows)) paste(sprintf("`%s`", rows), collapse = " + ") else "."
  wide <- dcast(dt, stats::as.formula(sprintf("%s ~ `%s`", lhs, col)),
                value.var = value, drop = c(TRUE, FALSE))
  if (!length(rows)) wide[, "." := NULL]
  without_axis_factors(wide, rows)
}

ratio_or_na <- function(x, base) {
  ifelse(!is.na(base) & base > 0, x / base, NA_real_)
}

# The rows of the version table: memory and binlog, those the study has.
version_rows <- function(axes) {
  intersect(c("memory", "binlog"), axes)
}

# Axes that make sections: those that vary besides version and the rows.
version_sections <- function(summary, axes) {
  varying_axes(summary, setdiff(axes, c("version", version_rows(axes))))
}

# Study 6: per section (engine and other varying axes), rows memory [x
# binlog], one column per version with the median over repetitions of the
# final tps, then "<version>/<baseline>" ratios (NA where a section lacks the
# version). attrs group_by, ratios, preamble.
versions_table <- function(summary, axes, baseline = list()) {
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(not_applicable_table(note))
  group <- version_sections(summary, axes)
  rows <- c(group, version_rows(axes))
  by <- unique(c(rows, "version", intersect("engine", axes)))
  cells <- summary[, .(tps = median_or_na(tps)), by = by]
  bases <- version_baselines(summary, axes, baseline)
  add_baseline_column(cells, bases)
  cells[, .setting := 1L]
  keys <- c(".setting", rows)
  base_tps <- cells[version == base, c(keys, "tps"), with = FALSE]
  cells[base_tps, tps_base := i.tps, on = keys]
  cells[, ratio := ratio_or_na(tps, tps_base)]
  cells[, ratio_name := paste0(version, "/", base)]

  wide <- pivot_wide(cells, rows, "version", "tps")
  ratios <- cells[version != base & !is.na(tps_base)]
  ratio_names <- character()
  if (nrow(ratios)) {
    order_of <- version_levels(summary$version)
    names_order <- unique(ratios[, .(ratio_name, v = match(version, order_of),
                                     b = match(base, order_of))])
    ratio_names <- names_order[order(v, b), ratio_name]
    ratios[, ratio_name := factor(ratio_name, levels = ratio_names)]
    lhs <- if (length(rows)) paste(sprintf("`%s`", rows), collapse = " + ") else "."
    ratio_wide <- dcast(with_axis_factors(ratios, rows),
                        stats::as.formula(paste(lhs, "~ ratio_name")),
                        value.var = "ratio", drop = c(TRUE, FALSE))
    if (!length(rows)) {
      wide <- cbind(wide, ratio_wide[, ..ratio_names])
    } else {
      ratio_wide <- without_axis_factors(ratio_wide, rows)
      wide <- ratio_wide[wide, on = rows]
      setcolorder(wide, c(rows, version_levels(summary$version), ratio_names))
    }
  }
  order_rows(wide, rows)
  setattr(wide, "group_by", group)
  setattr(wide, "ratios", ratio_names)
  setattr(wide, "preamble", paste(c(
    paste0("Median over repetitions of sysbench's final tps (transactions/s), by ",
           if (length(version_rows(axes))) paste(version_rows(axes), collapse = " and ")
           else "cell", " (rows) and server version (columns)."),
    if (length(ratio_names)) {
      "<version>/<baseline>: that version's tps divided by the baseline version's."
    },
    baseline_sentence(bases),
    same_sentence(summary, setdiff(axes, "version"))), collapse = " "))
  wide[]
}

# The no-binlog / binlog table: per section (as versions_table()), rows
# version x memory, one column per binlog value, then "<base>/<binlog>" for
# every other binlog value (base: params$baseline$binlog, else "off"). NULL
# when the study has no binlog axis; a not-applicable table when it has one
# binlog value.
binlog_versions_table <- function(summary, axes, baseline = list()) {
  if (!"binlog" %in% axes) return(NULL)
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(not_applicable_table(note))
  if (uniqueN(stats::na.omit(summary$binlog)) < 2) {
    return(not_applicable_table(sprintf(
      "not applicable: this study has one binlog value (%s), nothing to compare",
      paste(unique(stats::na.omit(summary$binlog)), collapse = ", "))))
  }
  group <- version_sections(summary, axes)
  rows <- c(group, "version", intersect("memory", axes))
  cells <- summary[, .(tps = median_or_na(tps)), by = c(rows, "binlog")]
  wide <- pivot_wide(cells, rows, "binlog", "tps")
  base <- baseline_value(summary$binlog, "binlog", baseline)
  others <- setdiff(axis_levels(summary$binlog, "binlog"), base)
  ratios <- paste0(base, "/", others)
  for (i in seq_along(others)) {
    set(wide, j = ratios[i], value = ratio_or_na(wide[[base]], wide[[others[i]]]))
  }
  order_rows(wide, rows)
  setattr(wide, "group_by", group)
  setattr(wide, "ratios", ratios)
  setattr(wide, "preamble", paste(
    "Median over repetitions of sysbench's final tps (transactions/s), by version",
    "and memory (rows) and binlog (columns).",
    sprintf(paste("%s: tps with binlog = %s divided by tps with that binlog value",
                  "(no-binlog / binlog); above 1 means the binary log costs",
                  "throughput: 1.43 is 30%% fewer transactions/s."),
            paste(ratios, collapse = ", "), base)))
  wide[]
}

# ---------------------------------------------------------------------------
# Beyond noise

# The medians of `blocks` consecutive, (nearly) equal parts of x; one value
# per element when x is shorter.
block_medians <- function(x, blocks = NOISE_BLOCKS) {
  x <- x[!is.na(x)]
  n <- length(x)
  if (n == 0) return(numeric())
  k <- min(blocks, n)
  block <- ceiling(seq_len(n) * k / n)
  as.numeric(tapply(x, block, stats::median))
}

# "faster", "slower" or "within noise": a against b (values of one cell each,
# e.g. per-repetition medians). Beyond noise when the ranges [min, max] do
# not overlap and the medians differ by more than NOISE_SPREADS times the
# larger spread (max - min). Fewer than 2 values on a side: within noise
# (no spread to judge by). NA when a side has no value.
noise_verdict <- function(a, b) {
  a <- a[!is.na(a)]
  b <- b[!is.na(b)]
  if (length(a) == 0 || length(b) == 0) return(NA_character_)
  if (length(a) < 2 || length(b) < 2) return("within noise")
  overlap <- max(a) >= min(b) && max(b) >= min(a)
  spread <- max(diff(range(a)), diff(range(b)))
  difference <- stats::median(a) - stats::median(b)
  if (overlap || abs(difference) <= NOISE_SPREADS * spread) return("within noise")
  if (difference > 0) "faster" else "slower"
}

# Per cell: tps (median over repetitions of each repetition's median
# per-second tps, seconds >= 1), the per-repetition medians, the block
# medians of its per-second series (repetitions one after the other) and the
# number of repetitions.
noise_cells <- function(samples, axes) {
  dt <- samples[second >= 1L & !is.na(tps)]
  setorderv(dt, c(axes, "rep", "second"))
  per_rep <- dt[, .(rep_median = stats::median(tps)), by = c(axes, "rep")]
  cells <- per_rep[, .(tps = stats::median(rep_median), reps = .N,
                       rep_values = list(rep_median)), by = axes]
  blocks <- dt[, .(block_values = list(block_medians(tps))), by = axes]
  cells[blocks, block_values := i.block_values, on = axes]
  cells[]
}

# Each version against its engine's baseline version in every setting (each
# combination of the other axes): columns the setting axes that vary, version,
# baseline, tps, tps_baseline, ratio, verdict. By repetitions when both cells
# have 2 or more, else by NOISE_BLOCKS blocks of the per-second series. attrs
# group_by (the sections of the version table), by_blocks (comparisons made
# by blocks), preamble.
version_noise_table <- function(summary, samples, axes, baseline = list()) {
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(not_applicable_table(note))
  setting <- setdiff(axes, "version")
  # the version table's sections first, then its rows
  group <- version_sections(summary, axes)
  shown <- c(group, setdiff(varying_axes(summary, setting), group))
  reps <- unique(summary[, c(axes, "rep"), with = FALSE])
  cells <- noise_cells(samples[reps, on = c(axes, "rep"), nomatch = NULL], axes)
  bases <- version_baselines(summary, axes, baseline)
  add_baseline_column(cells, bases)
  base_cells <- cells[version == base]
  pairs <- cells[version != base]
  pairs[, .setting := 1L]
  base_cells[, .setting := 1L]
  keys <- c(".setting", setting)
  pairs[base_cells, `:=`(tps_baseline = i.tps, base_reps = i.reps,
                         base_rep_values = i.rep_values,
                         base_block_values = i.block_values), on = keys]
  pairs <- pairs[!vapply(base_rep_values, is.null, TRUE)]
  if (nrow(pairs)) {
    pairs[, by_blocks := reps < 2L | base_reps < 2L]
    pairs[, verdict := vapply(seq_len(.N), function(i) {
      if (by_blocks[i]) noise_verdict(block_values[[i]], base_block_values[[i]])
      else noise_verdict(rep_values[[i]], base_rep_values[[i]])
    }, "")]
  } else {
    pairs[, `:=`(tps_baseline = numeric(), by_blocks = logical(),
                 verdict = character())]
  }
  pairs[, `:=`(baseline = base, ratio = ratio_or_na(tps, tps_baseline))]
  out <- pairs[, c(shown, NOISE_COLUMNS), with = FALSE]
  by_blocks <- pairs$by_blocks
  ord <- copy(out)[, .i := .I]
  order_rows(ord, c(shown, "version"))
  out <- out[ord$.i]
  setattr(out, "group_by", group)
  setattr(out, "by_blocks", by_blocks[ord$.i])
  setattr(out, "preamble", noise_preamble(nrow(out), sum(by_blocks), bases,
                                          same_sentence(summary, setting)))
  out[]
}

noise_preamble <- function(n, n_blocks, bases, same) {
  basis <- if (n == 0) {
    NULL
  } else if (n_blocks == 0) {
    "Every comparison here is by repetitions."
  } else if (n_blocks == n) {
    sprintf(paste("Every comparison here involves a cell with a single repetition,",
                  "so all are by %d blocks of the per-second series."), NOISE_BLOCKS)
  } else {
    sprintf("%d of %d comparisons involve a cell with a single repetition and are by %d blocks.",
            n_blocks, n, NOISE_BLOCKS)
  }
  paste(c(
    "Each version against the baseline version of its engine, in every setting",
    "(each combination of the other axes). Method: for each cell, the median",
    "of the per-second tps (sysbench's intervals, seconds >= 1) of every",
    "repetition; tps is the median of these over repetitions. A difference is",
    sprintf(paste("beyond run-to-run noise when the ranges [min, max] of the two cells'",
                  "per-repetition medians do not overlap, and the difference of",
                  "their medians exceeds %s times the larger within-cell spread",
                  "(max - min). When a cell has a single repetition, its per-second",
                  "series is split into %d equal blocks and the block medians take",
                  "the place of the per-repetition medians, by the same rule."),
            format(NOISE_SPREADS), NOISE_BLOCKS),
    "verdict: faster or slower (beyond noise), else within noise; ratio: tps / tps_baseline.",
    basis, baseline_sentence(bases), same), collapse = " ")
}

# Versions x settings at a glance: per section, rows memory [x binlog], one
# column per version with "faster (1.30)", "within noise (1.01)".
noise_grid <- function(noise) {
  rows <- setdiff(names(noise), NOISE_COLUMNS)
  dt <- copy(noise)
  dt[, mark := ifelse(is.na(verdict), "NA",
                      sprintf("%s (%s)", verdict, format_number(ratio)))]
  pivot_wide(dt, rows, "version", "mark")
}

# ---------------------------------------------------------------------------
# Markdown

# Columns of dt that hold only NA, except `keep`.
empty_columns <- function(dt, keep = character()) {
  cols <- setdiff(names(dt), keep)
  cols[vapply(cols, function(c) all(is.na(dt[[c]])), TRUE)]
}

# A table in sections of group_by ("### engine=innodb"), each without the
# columns that are all NA in it (versions another engine ran). A section left
# without any of `ratios` says so in a line when `alone` is given.
section_md_lines <- function(dt, group_by = character(), keep = character(),
                             ratios = character(), alone = NULL) {
  part_lines <- function(part) {
    drop <- empty_columns(part, keep)
    if (length(drop)) part <- part[, !..drop]
    if (!is.null(alone) && length(ratios) && !any(ratios %in% names(part))) {
      return(c(alone, ""))
    }
    c(md_lines(part), "")
  }
  if (!length(group_by)) return(part_lines(dt))
  out <- character()
  groups <- unique(dt[, ..group_by])
  for (i in seq_len(nrow(groups))) {
    key <- groups[i]
    part <- dt[key, on = group_by, nomatch = NULL][, !..group_by]
    out <- c(out, paste("###", cell_name(key, group_by)), "", part_lines(part))
  }
  out
}

table_lines <- function(dt, keep, alone = NULL) {
  note <- attr(dt, "not_applicable")
  if (!is.null(note)) return(c(note, ""))
  c(attr(dt, "preamble"), "",
    section_md_lines(dt, attr(dt, "group_by"), keep, attr(dt, "ratios"), alone))
}

versions_md_lines <- function(versions, binlog, axes) {
  note <- attr(versions, "not_applicable")
  if (!is.null(note)) return(c(note, ""))
  out <- c("## tps by server version", "",
           table_lines(versions, keep = version_rows(axes)))
  if (!is.null(binlog)) {
    out <- c(out, "## no-binlog / binlog by server version", "",
             table_lines(binlog, keep = c("version", "memory"),
                         alone = "One binlog value only here; no ratio."))
  }
  out
}

noise_md_lines <- function(noise, axes) {
  note <- attr(noise, "not_applicable")
  if (!is.null(note)) return(c(note, ""))
  if (nrow(noise) == 0) {
    return(c(attr(noise, "preamble"), "",
             "No setting has a version besides its baseline version; nothing to compare.",
             ""))
  }
  grid <- noise_grid(noise)
  group <- attr(noise, "group_by")
  c(attr(noise, "preamble"), "",
    "## Versions x settings", "",
    "Verdict against the baseline version, with the ratio of tps in brackets.", "",
    section_md_lines(grid, group, keep = version_rows(axes)),
    "## All comparisons", "",
    md_table_lines(noise))
}

# ---------------------------------------------------------------------------
# Plot

# Median, min and max of the final tps over repetitions per cell, with the
# version as a factor in reading order.
version_plot_data <- function(summary, axes) {
  facets <- varying_axes(summary, setdiff(axes, c("version", "memory")))
  dt <- with_version_factors(summary[!is.na(tps)], c("version", "memory", facets))
  dt[, .(tps = stats::median(tps), tps_min = min(tps), tps_max = max(tps),
         reps = .N), by = c(facets, "memory", "version")]
}

# Panels for the facet axes: a wrap for one, else rows of all but the last and
# a column per value of the last. list(facet, rows).
version_panels <- function(dt, facets) {
  if (!length(facets)) return(list(facet = NULL, rows = 1L))
  if (length(facets) == 1) {
    n <- uniqueN(dt[[facets]])
    return(list(facet = facet_wrap(facets, labeller = label_both, scales = "free_y"),
                rows = wrap_dims(n)[1]))
  }
  row_axes <- utils::head(facets, -1)
  side <- function(a) paste(sprintf("`%s`", a), collapse = " + ")
  list(facet = facet_grid(stats::as.formula(paste(side(row_axes), "~",
                                                  side(utils::tail(facets, 1)))),
                          labeller = label_both, scales = "free_y"),
       rows = nrow(unique(dt[, ..row_axes])))
}

plot_versions <- function(summary, axes, caption) {
  title <- "Throughput vs memory by server version"
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(empty_plot(title, note, caption))
  if (!"memory" %in% axes) return(empty_plot(title, not_applicable("memory"), caption))
  dt <- version_plot_data(summary, axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no tps figures", caption))
  facets <- setdiff(names(dt), c("memory", "version", "tps", "tps_min", "tps_max", "reps"))
  panels <- version_panels(dt, facets)
  fixed <- fixed_axes_text(summary, setdiff(axes, c("version", "memory")))
  dodge <- position_dodge(width = 0.3)
  p <- ggplot(dt, aes(memory, tps, colour = version, group = version)) +
    geom_line(position = dodge) +
    geom_point(size = 2, position = dodge) +
    geom_errorbar(aes(ymin = tps_min, ymax = tps_max), width = 0.25,
                  position = dodge) +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    scale_colour_dbsweep() +
    panels$facet +
    labs(title = title,
         subtitle = paste(c(paste("sysbench's final tps, median over repetitions;",
                                  "bars show min and max"), fixed), collapse = "; "),
         x = MEMORY_TITLE, y = "transactions/s", colour = VERSION_TITLE,
         caption = caption) +
    theme_dbsweep()
  setattr(p, "panel_rows", panels$rows)
  p
}

# Inches: taller for more rows of panels.
version_plot_size <- function(p) {
  rows <- attr(p, "panel_rows")
  if (is.null(rows) || rows <= 2) return(c(width = 8, height = 5))
  c(width = 8, height = min(30, 2.2 + 1.7 * rows))
}

# ---------------------------------------------------------------------------

rule_versions <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  baseline <- params[["baseline"]]
  all_reps <- read_database_summary(input[["summary"]], axes)
  summary <- database_rows(all_reps)
  samples <- drop_other_tools(read_database_samples(input[["samples"]], axes),
                              all_reps, axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  log_line(paste("%d database repetitions (%d rows of other tools left out),",
                 "%d per-second samples, axes: %s"),
           nrow(summary), nrow(all_reps) - nrow(summary), nrow(samples),
           paste(axes, collapse = ", "))
  check_sample_counts(summary, samples, axes)
  if ("version" %in% axes) {
    log_line("version values: %s", paste(version_levels(summary$version), collapse = ", "))
  }

  versions <- versions_table(summary, axes, baseline)
  binlog <- binlog_versions_table(summary, axes, baseline)
  noise <- version_noise_table(summary, samples, axes, baseline)

  write_csv(versions, output[["versions_csv"]])
  write_md_lines(versions_md_lines(versions, binlog, axes), output[["versions_md"]],
                 caption)
  log_line("versions: %d rows -> %s", nrow(versions), output[["versions_csv"]])

  write_csv(noise, output[["noise_csv"]])
  write_md_lines(noise_md_lines(noise, axes), output[["noise_md"]], caption)
  if (is.null(attr(noise, "not_applicable"))) {
    log_line("noise: %d comparisons (%s) -> %s", nrow(noise),
             paste(sprintf("%s %d", VERDICTS,
                           vapply(VERDICTS, function(v) sum(noise$verdict %in% v), 0L)),
                   collapse = ", "),
             output[["noise_csv"]])
  } else {
    log_line("noise: %s -> %s", attr(noise, "not_applicable"), output[["noise_csv"]])
  }

  plot <- plot_versions(summary, axes, caption)
  size <- version_plot_size(plot)
  save_plot(plot, output[["version_plot"]], width = size[["width"]],
            height = size[["height"]])
  log_line("version_plot -> %s", output[["version_plot"]])
  invisible(list(versions = versions, binlog = binlog, noise = noise, plot = plot))
}
