# rule_topology and rule_recovery end to end on the real tables of a topology study with timed events
# (tests/fixtures/topology_tables: a semi-sync replica cut off for 4 s, a Galera member killed).

fixture <- function(name) test_path("..", "fixtures", "topology_tables", name)
AXES <- c("engine", "memory", "filesystem", "threads", "workload", "topology", "proxy", "events")

test_that("the topology table has each cell's replication figures and the replication plot its series", {
  dir <- tempfile("topology-")
  dir.create(dir)
  output <- list(table_csv = file.path(dir, "topology.csv"), table_md = file.path(dir, "topology.md"),
                 replication = file.path(dir, "replication.png"))
  input <- list(summary = fixture("summary.csv.gz"), counters = fixture("counters.csv.gz"),
                events = fixture("events.csv.gz"), provenance = fixture("provenance.json"),
                samples = fixture("samples.csv.gz"))
  p <- rule_topology(input, output, list(axes = AXES), log = file.path(dir, "topology.log"))
  table <- fread(output$table_csv)
  expect_equal(sort(table$topology), c("galera3", "semisync"))
  semi <- table[topology == "semisync"]
  expect_gte(semi$sync_off_s, 2)  # the primary stopped waiting for its cut-off replica
  expect_gt(semi$rtt_node_ms, 0)
  expect_true(all(c("lag_max_s", "behind_max") %in% names(table)))
  expect_match(paste(readLines(output$table_md), collapse = "\n"), "share its CPUs")
  expect_gt(file.size(output$replication), 10000)
  built <- ggplot_build(p)
  metrics <- levels(built$plot$data$.metric)
  expect_true(all(c("behind the primary", "primary waits for a replica (1/0)") %in% metrics))
  # the client's throughput on top, on the same seconds: each second's tps as the samples have it
  expect_equal(metrics[1], "throughput (transactions/s)")
  drawn <- as.data.table(built$plot$data)[.metric == metrics[1] & topology == "semisync" & rep == 1L]
  samples <- read_table(fixture("samples.csv.gz"), AXES, c("rep", "second"))
  expected <- samples[topology == "semisync" & rep == 1L & !is.na(tps)]
  expect_equal(drawn[order(second)]$value, expected[order(second)]$tps)
  expect_equal(unique(drawn$node), "client")
  # and its latency, each second's p95 as sysbench reported it, on the same seconds
  expect_equal(metrics[2], "latency: each second's p95 (ms)")
  drawn <- as.data.table(built$plot$data)[.metric == metrics[2] & topology == "semisync" & rep == 1L]
  expected <- samples[topology == "semisync" & rep == 1L & !is.na(lat_pct_ms)]
  expect_equal(drawn[order(second)]$value, expected[order(second)]$lat_pct_ms)
  spans <- built$plot$layers[[length(built$plot$layers)]]$data  # the event names
  expect_setequal(spans$label, c("cut link primary-replica1", "kill node2"))
})

test_that("the topology table's lag_end_s is the median over repetitions of the lag at the window's end", {
  # oracle: a replica 2 s and 6 s behind at the end of two repetitions (median 4), caught up in a third cell
  summary <- data.table(topology = c("semisync", "semisync", "async"), rep = c(1L, 2L, 1L), tps = 100,
                        lat_p95_ms = 5, lag_max_s = c(9, 7, 1), lag_end_s = c(2, 6, 0), behind_max = 10,
                        sync_off_s = 0, flow_paused_share = NA_real_, rtt_client_ms = 0.1, rtt_node_ms = 2)
  table <- topology_table(summary, "topology")
  expect_equal(table[topology == "semisync", lag_end_s], 4)
  expect_equal(table[topology == "async", lag_end_s], 0)
  expect_equal(names(table)[1:6], c("topology", "reps", "tps", "lat_p95_ms", "lag_max_s", "lag_end_s"))
  # a summary aggregated before lag_end_s was a column: the table has none, and no error
  expect_false("lag_end_s" %in% names(topology_table(summary[, !"lag_end_s"], "topology")))
})

test_that("event spans run from each action to its undo, and an action without an end is a mark", {
  spans <- event_spans(read_events(fixture("events.csv.gz"), AXES), AXES)
  cut <- spans[topology == "semisync"]
  expect_equal(c(cut$xmin, cut$xmax), c(3.002, 7.0), tolerance = 1e-6)
  kill <- spans[topology == "galera3"]
  expect_equal(kill$xmax - kill$xmin, EVENT_MARK_S)
  expect_equal(kill$label, "kill node2")
})

test_that("the recovery table has one row per event with what it cost", {
  dir <- tempfile("topology-")
  dir.create(dir)
  output <- list(table_csv = file.path(dir, "recovery.csv"), table_md = file.path(dir, "recovery.md"))
  input <- list(recovery = fixture("recovery.csv.gz"), provenance = fixture("provenance.json"))
  table <- rule_recovery(input, output, list(axes = AXES), log = file.path(dir, "recovery.log"))
  expect_equal(sort(table$action), c("cut", "kill"))
  expect_gt(table[action == "kill", lost_tx], 0)
  expect_gte(table[action == "cut", sync_off_s], 2)
  expect_match(paste(readLines(output$table_md), collapse = "\n"), "Recovery from timed events")
})

test_that("a repetition whose replica never caught up counts as later than any in the median", {
  # oracle: catch-up times 4, 6 and never; then 4, never, never
  expect_equal(censored_median(c(4, 6, NA), c(NA, "", "not caught up")), 6)
  expect_true(is.na(censored_median(c(4, NA, NA), c(NA, "not caught up", "not caught up"))))
  expect_equal(censored_median(c(4, NA), c(NA, NA)), 4)  # a figure that does not apply is left out
  expect_equal(why_text(c(NA, "not caught up", "not caught up")), "not caught up (2 of 3 repetitions)")
  expect_equal(why_text("not caught up"), "not caught up")
  expect_true(is.na(why_text(c(NA, ""))))
})

test_that("the recovery table keeps an empty figure beside the words that say why", {
  dir <- tempfile("recovery-")
  dir.create(dir)
  output <- list(table_csv = file.path(dir, "recovery.csv"), table_md = file.path(dir, "recovery.md"))
  input <- list(recovery = fixture("recovery.csv.gz"), provenance = fixture("provenance.json"))
  table <- rule_recovery(input, output, list(axes = AXES), log = file.path(dir, "recovery.log"))
  cut <- table[action == "cut"]
  expect_true(is.na(cut$catch_up_s))  # not the window's end (7 s) as a catch-up time
  expect_match(cut$catch_up_why, "not caught up by the window's end: 6,600 transactions behind")
  expect_true(is.na(cut$lag_peak_s))
  expect_equal(cut$lag_end_s, 6)
})
