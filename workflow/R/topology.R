# Topology cells (the axes topology, proxy, network): a table of each cell's
# replication figures beside its throughput and latency, and the per-second
# replication series of every node (lag, how far behind, whether the primary
# waited for its replicas, Galera's flow control). Throughput and latency by
# topology against a baseline (e.g. baseline: {topology: single}) are the
# statistics rule's comparisons, the one comparison method of the study.
#
# Snakemake: input summary, samples, counters, provenance, events; output
# table_csv, table_md, replication; params axes; log.

TOPOLOGY_COLUMNS <- c("lag_max_s", "lag_end_s", "behind_max", "sync_off_s", "unacked_tx",
                      "flow_paused_share", "rtt_client_ms", "rtt_node_ms")
# Summaries aggregated before unacked_tx was counted (2026-11-27), or before lag_end_s was a summary
# column, have none.
TOPOLOGY_REQUIRED <- setdiff(TOPOLOGY_COLUMNS, c("unacked_tx", "lag_end_s"))
# The per-second series collect derives in words every server family shares.
TOPOLOGY_SERIES <- c(replication_lag_s = "replica lag (s)",
                     replication_behind = "behind the primary",
                     sync_on = "primary waits for a replica (1/0)",
                     unacked_tx = "commits no replica acknowledged",
                     flow_paused = "flow control: share of the second paused")

# Per cell: repetitions, median tps and p95 latency, and the median of each
# topology figure over its repetitions.
topology_table <- function(summary, axes) {
  figures <- intersect(c("tps", "lat_p95_ms", TOPOLOGY_COLUMNS), names(summary))
  dt <- summary[, c(list(reps = .N), lapply(.SD, median_or_na)), by = axes,
                .SDcols = figures]
  keep <- c(axes, "reps", figures[vapply(figures, function(f) !all(is.na(dt[[f]])), TRUE)])
  dt <- dt[, ..keep]
  order_by_axes(dt, axes)
  dt[]
}

# The client's throughput and latency (sysbench's per-second p95, lat_pct_ms), drawn on top of the
# replication series on the same seconds (samples and counters share the run's clock).
CLIENT_SERIES <- c(tps = "throughput (transactions/s)", lat_pct_ms = "latency: each second's p95 (ms)")

# The derived series of the topology's nodes, with .cell (the axes that vary)
# and .line (node and repetition); with samples, the client's per-second tps
# and latency of the same repetitions first (node "client"), each where the
# samples have it.
topology_series <- function(counters, axes, samples = NULL) {
  dt <- counters[name %in% names(TOPOLOGY_SERIES) & !is.na(node) & node != ""]
  if (nrow(dt) == 0) return(dt)
  if (!is.null(samples)) {
    keys <- c(axes, "rep")
    mine <- samples[unique(dt[, ..keys]), on = keys, nomatch = NULL]
    for (column in intersect(names(CLIENT_SERIES), names(mine))) {
      client <- mine[!is.na(get(column)), c(keys, "second", column), with = FALSE]
      setnames(client, column, "value")
      dt <- rbind(dt, client[, `:=`(name = column, node = "client")], fill = TRUE)
    }
  }
  vary <- varying_axes(dt, axes)
  dt[, .cell := cell_factor(dt, vary, width = 30)]
  series <- c(CLIENT_SERIES, TOPOLOGY_SERIES)
  dt[, .metric := factor(series[name], levels = series)]
  dt[, .line := interaction(node, rep, drop = TRUE)]
  dt[]
}

plot_replication <- function(counters, axes, caption, spans = data.table(), samples = NULL) {
  title <- "Replication per second beside throughput and latency: lag, distance, waiting, flow control"
  dt <- topology_series(counters, axes, samples)
  if (nrow(dt) == 0) {
    return(empty_plot(title, "no replication counters in this study (no replicas or cluster)", caption))
  }
  cells <- nlevels(dt$.cell)
  p <- ggplot(dt, aes(second, value, colour = node, group = .line)) +
    geom_line(linewidth = 0.4) +
    facet_grid(.metric ~ .cell, scales = "free_y",
               labeller = labeller(.metric = label_wrap_gen(18), .cell = label_wrap_gen(strip_width(cells)))) +
    scale_colour_dbsweep(name = "node") +
    scale_y_continuous(labels = thousands) +
    labs(title = title,
         subtitle = plot_subtitle(fixed_axes_text(dt, axes)),
         x = "time (s)", y = NULL, caption = caption) +
    theme_dbsweep()
  p <- with_event_spans(p, spans_for(spans, dt, axes, ".cell"))
  with_panel_rows(p, nlevels(droplevels(dt$.metric)))
}

rule_topology <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  summary <- database_rows(read_table(input[["summary"]], axes,
                                      c(SUMMARY_COLUMNS, TOPOLOGY_REQUIRED)))
  counters <- read_table(input[["counters"]], axes, c(COUNTERS_COLUMNS, "node"))
  counters <- counters[summary[, c(axes, "rep"), with = FALSE], on = c(axes, "rep"), nomatch = NULL]
  caption <- caption_text(read_provenance(input[["provenance"]]))
  table <- topology_table(summary, axes)
  log_line("%d topology cells, %d repetitions", nrow(table), nrow(summary))
  write_csv(table, output[["table_csv"]])
  preamble <- c("# Topologies: replication figures per cell",
                "",
                paste("Medians over repetitions. lag_max_s: the largest lag a replica reported;",
                      "lag_end_s: the largest lag at the window's last second (a replica still behind then);",
                      "behind_max: the most transactions (MariaDB) or WAL bytes (PostgreSQL) a replica",
                      "was behind the primary; sync_off_s: seconds the primary did not wait for a",
                      "replica (semi-sync fallen back to async); unacked_tx: commits no replica",
                      "acknowledged, each lost had the primary failed then; flow_paused_share: the share of the",
                      "window Galera's flow control paused replication; rtt: measured round trips",
                      "(ms) client to first node and between the first two nodes."),
                "",
                paste("On one host the nodes share its CPUs and disks: the shapes are a cluster's,",
                      "not its absolute figures."))
  write_md_table(table, output[["table_md"]], preamble = preamble, caption = caption)
  samples <- if (length(input[["samples"]])) read_table(input[["samples"]], axes, c("rep", "second"))
  p <- plot_replication(counters, axes, caption, event_spans(read_events(input[["events"]], axes), axes),
                        samples)
  save_plot(p, output[["replication"]])
  log_line("replication -> %s", output[["replication"]])
  invisible(p)
}
