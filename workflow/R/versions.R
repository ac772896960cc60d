# Server versions side by side (study 6): median tps per version by memory
# with the ratio to the baseline version and its verdict, the binary log's
# cost on each version, and tps against memory with one line per version.
#
# Snakemake: input summary, cell_stats_csv, comparisons_csv (the statistics
# rule's) (+ optional provenance); output versions_csv, versions_md,
# version_plot; params axes; log.
#
# Medians, ratios and verdicts are the statistics rule's (cell_stats.csv,
# comparisons.csv: one method for every table that compares cells). Versions
# are compared within one engine and the other axes: "debian" is MariaDB 10.11
# for innodb and PostgreSQL 15 for postgresql. The baseline version is
# baseline.version, else the first version in reading order ("debian" first,
# then numbers part by part: 10.11.5 < 11.4 < 16 < 17, then builds' names); an
# engine without the baseline version has no ratios.
#
# versions.csv holds the version table of versions.md (rows memory [x binlog],
# one column per version, "<version>/<baseline>" ratios and verdicts),
# sections' axes first. versions.md adds, when the binlog axis has two values
# or more, rows version x memory, one column per binlog value,
# "<binlog>/<baseline binlog>" ratios.
#
# Every output is written. When the study has no version axis, or only one
# version, the tables have columns status ("not applicable") and note ("not
# applicable: this study has no version axis") and the plot says so.

VERSION_TITLE <- "server version"

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

# The rows of the version table: memory and binlog, those the study has.
version_rows <- function(axes) {
  intersect(c("memory", "binlog"), axes)
}

# Study 6: per section (engine and other varying axes), rows memory [x
# binlog], one column per version, then "<version>/<baseline>" ratios and
# verdicts (NA where a section lacks the version).
versions_table <- function(summary, stats, axes) {
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(not_applicable_table(note))
  tps_comparison(stats, axes, "version", version_rows(axes), needs = "version")
}

# The binary log's cost per version: rows version x memory, one column per
# binlog value, "<binlog>/<baseline>" ratios. NULL without a binlog axis.
binlog_versions_table <- function(summary, stats, axes) {
  if (!"binlog" %in% axes) return(NULL)
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(not_applicable_table(note))
  tps_comparison(stats, axes, "binlog", c("version", "memory"), needs = "binlog")
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
    out <- c(out, "## binlog by server version", "",
             table_lines(binlog, keep = c("version", "memory"),
                         alone = "One binlog value only here; no ratio."))
  }
  out
}

# ---------------------------------------------------------------------------
# Plot

plot_versions <- function(summary, cells, axes, caption) {
  title <- "Throughput vs memory by server version"
  note <- versions_not_applicable(summary, axes)
  if (!is.null(note)) return(empty_plot(title, note, caption))
  if (!"memory" %in% axes) return(empty_plot(title, not_applicable("memory"), caption))
  dt <- cells[metric == "tps" & !is.na(median)]
  if (nrow(dt) == 0) return(empty_plot(title, "no tps figures", caption))
  facets <- varying_axes(dt, setdiff(axes, c("version", "memory")))
  dt <- with_axis_factors(dt, c("version", "memory", facets))
  panels <- panel_layout(dt, facets, scales = "free_y")
  fixed <- fixed_axes_text(cells[metric == "tps"], setdiff(axes, c("version", "memory")))
  dodge <- position_dodge(width = 0.3)
  p <- ggplot(dt, aes(memory, median, colour = version, group = version)) +
    geom_line(position = dodge) +
    geom_point(size = 2, position = dodge) +
    geom_errorbar(aes(ymin = ci_low, ymax = ci_high), width = 0.25,
                  position = dodge) +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    scale_colour_dbsweep() +
    panels$facet +
    labs(title = title,
         subtitle = plot_subtitle(paste("median per-second tps of the steady-state windows;",
                                        "bars: its 95% CI (cell_stats.csv)"), fixed),
         x = MEMORY_TITLE, y = "transactions/s", colour = VERSION_TITLE,
         caption = caption) +
    theme_dbsweep()
  with_panel_rows(p, panels$rows)
}

# ---------------------------------------------------------------------------

rule_versions <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  summary <- database_rows(read_database_summary(input[["summary"]], axes))
  stats <- read_statistics(input, axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  log_line("%d database repetitions, axes: %s", nrow(summary), paste(axes, collapse = ", "))
  if ("version" %in% axes) {
    log_line("version values: %s", paste(axis_levels(summary$version, "version"), collapse = ", "))
  }

  versions <- versions_table(summary, stats, axes)
  binlog <- binlog_versions_table(summary, stats, axes)
  write_csv(versions, output[["versions_csv"]])
  write_md_lines(versions_md_lines(versions, binlog, axes), output[["versions_md"]],
                 caption)
  log_line("versions: %d rows -> %s", nrow(versions), output[["versions_csv"]])

  plot <- plot_versions(summary, stats$cells, axes, caption)
  save_plot(plot, output[["version_plot"]])
  log_line("version_plot -> %s", output[["version_plot"]])
  invisible(list(versions = versions, binlog = binlog, plot = plot))
}
