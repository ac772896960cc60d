"""What each figure on the summary page is, in one sentence with its unit: the page's Method section lists
the figures its tables, answer lines and plots show (a column named by an axis or an axis value is not
a figure). Names that could be confused say so: "p95 of per-second means" (persec_lat_p95_ms) is not
"the tool's p95" (lat_p95_ms).

A column "<metric> <statistic>" (cell_stats' chosen statistics: "tps mean") is defined by its metric
and its statistic; "<value>/<baseline>" (comparisons, engine_memory) is a ratio.
"""
from __future__ import annotations

import re

# Statistics of a cell's per-second values in the steady-state windows (cell_stats), in the metric's unit.
STATISTICS = {
    "median": "the median of the repetitions' medians of the per-second values, in the metric's unit",
    "ci": "the 95% confidence interval of the median ([low, high], in the metric's unit): a bootstrap over "
          "the repetitions' medians, or over blocks of the window with one repetition",
    "ci_low": "the low end of the median's 95% confidence interval, in the metric's unit",
    "ci_high": "the high end of the median's 95% confidence interval, in the metric's unit",
    "mean": "the mean of the per-second values, in the metric's unit",
    "sd": "the standard deviation of the per-second values, in the metric's unit",
    "p5": "the 5th percentile of the per-second values, in the metric's unit",
    "p25": "the 25th percentile of the per-second values, in the metric's unit",
    "p75": "the 75th percentile of the per-second values, in the metric's unit",
    "p95": "the 95th percentile of the per-second values (of a latency metric: the p95 of per-second means "
           "or p95s, not the tool's own p95), in the metric's unit",
    "min": "the smallest per-second value, in the metric's unit",
    "max": "the largest per-second value (of a latency metric: the largest per-second mean or p95, not the "
           "tool's own max), in the metric's unit",
    "rep_sd": "the standard deviation of the repetitions' medians, in the metric's unit",
    "rep_spread_pct": "(largest - smallest) / median of the repetitions' medians, in %",
    "rep_gmean": "the geometric mean of the repetitions' medians, in the metric's unit (what ratios compare)",
}

# Metrics of cell_stats and comparisons (the per-second series the statistics are of).
METRICS = {
    "tps": "throughput of a database cell: transactions/s, each second of the window",
    "iops": "throughput of a storage cell: I/O operations per second (IOPS), each second of the window",
    "lat_ms": "latency of a storage cell: the mean latency of each second's I/O (fio), in ms",
    "lat_p95_ms": "as a metric of cell_stats and comparisons: the 95th percentile of each second's "
                  "transactions or I/O (sysbench's per-interval p95), in ms; as a column of cells, saturation "
                  "and efficiency: the tool's own 95th percentile over the whole run, in ms, mean (efficiency: "
                  "median) over repetitions",
}

DEFINITIONS = {
    **METRICS,
    # the answer's lines
    "throughput": "the median per-second throughput of a cell (transactions/s or IOPS) with its 95% CI",
    "latency (median of per-second means)": "the median over the window of each second's mean latency, in ms, "
                                            "with its 95% CI",
    "latency (median of per-second p95s)": "the median over the window of each second's 95th percentile "
                                           "latency, in ms, with its 95% CI",
    "the tool's own latency over the whole run": "the tool's own percentiles of every operation of the run "
                                                 "(fio's completion latency, sysbench's histogram): p95 and p99 "
                                                 "are means over repetitions, max the largest of any, in ms",
    "ratio": "a cell's figure divided by the baseline cell's (no unit); its 95% CI and verdict come from the "
             "statistics rule ('within noise' when the CI contains 1)",
    "side by side ratio": "a workload's median divided by the baseline workload's (no unit when both share "
                          "one; else the two units as printed; no interval: workloads are not tested against "
                          "each other)",
    "run-to-run noise": "the median over cells with 2 repetitions or more of the sd of their repetitions' "
                        "medians relative to their median, in %",
    "ms per execution": "the median over repetitions of each repetition's median time of one execution of "
                        "the query, in ms",
    # cell_stats
    "metric": "which per-second series a row describes (tps, iops, lat_ms, lat_p95_ms)",
    "reps": "repetitions of the cell with results (a count)",
    "seconds": "per-second samples the statistics use (a count of seconds)",
    "ci_method": "how the median's CI was computed (the bootstrap and its blocks)",
    "not_steady": "repetitions that never reached steady state (a count)",
    "stall_seconds": "seconds of the windows below the stall share of the median (a count of seconds)",
    "longest_stall_s": "the longest run of stalled seconds, in s",
    # cells
    "persec_iops_mean": "the mean of the per-second IOPS over every measured second, in IOPS",
    "persec_iops_sd": "the standard deviation of the per-second IOPS, in IOPS",
    "persec_iops_p95": "the 95th percentile of the per-second IOPS, in IOPS",
    "persec_iops_max": "the largest per-second IOPS, in IOPS",
    "persec_mibs_mean": "the mean per-second bandwidth, in MiB/s",
    "persec_lat_mean_ms": "the mean of the per-second latencies (lat_source says which), in ms",
    "persec_lat_sd_ms": "the standard deviation of the per-second latencies, in ms",
    "persec_lat_p95_ms": "the p95 of per-second means (or of per-second p95s, per lat_source): not the tool's "
                         "own p95 (lat_p95_ms), in ms",
    "persec_lat_max_ms": "the largest per-second latency (a second's mean or p95): not the tool's own max "
                         "(lat_max_ms), in ms",
    "lat_source": "the per-second latency used: lat_ms (each second's mean) or lat_pct_ms (each second's p95)",
    "lat_mean_ms": "the tool's own mean latency over the whole run, in ms, mean over repetitions",
    "lat_p99_ms": "the tool's own 99th percentile latency over the whole run, in ms, mean over repetitions",
    "lat_max_ms": "the tool's own maximum latency over the whole run (fio's clat max, sysbench's max), in ms, "
                  "the largest of any repetition",
    # saturation
    "threads": "the client's threads (or fio's jobs)",
    "mibs": "the tool's own bandwidth over the whole run, in MiB/s, mean over repetitions",
    "r_s": "iostat's reads/s of the device (r/s, in requests/s), mean over the measured seconds and repetitions",
    "w_s": "iostat's writes/s of the device (w/s, in requests/s), mean over the measured seconds and repetitions",
    "aqu_sz": "iostat's average queue size of the device (requests), mean over the measured seconds",
    "util_pct": "iostat's %util of the device (share of time busy, %), mean over the measured seconds",
    "class_util_pct": "the device class's utilisation (%): in each second, the largest share of one of the "
                      "class's caps that the capped device's rates reached (reads/s, writes and flushes/s, "
                      "bytes/s; its IOs counted as the throttle charged them), mean over the measured "
                      "seconds; empty without a class",
    "saturation": "the cell's lat_mean_ms divided by that at its group's smallest thread count (no unit)",
    # efficiency
    "hit_ratio": "the share of page reads served from memory (0..1)",
    "kb_read_per_txn": "KB the device read per transaction (iostat, the whole host)",
    "kb_written_per_txn": "KB the device wrote per transaction (iostat, the whole host)",
    "log_kb_per_txn": "KB the engine wrote to its own log per transaction (the server's counters)",
    "binlog_kb_per_txn": "KB written to the binary log per transaction",
    "cpu_us_per_txn": "CPU microseconds per transaction (vmstat us + sy: the whole host)",
    "cs_per_txn": "context switches per transaction (vmstat cs: the whole host)",
    "server_cpu_us_per_txn": "CPU microseconds of the servers' own processes per transaction",
    "server_kb_read_per_txn": "KB the servers' own processes read from the block layer per transaction",
    "server_kb_written_per_txn": "KB the servers' own processes wrote to the block layer per transaction",
    "datadir_mb_start": "the data directory's size at the window's start, in MB",
    "datadir_mb_end": "the data directory's size at the window's end, in MB",
    "memory_limit_mb": "the server's memory cap, in MB (NA when none)",
    # declared vs delivered (delivered.py)
    "deviated_reps": "the cell's repetitions with a setting that ran otherwise than declared (a count; "
                     "results/tables/delivered.csv.gz)",
    "includes_deviated": "whether the comparison's cell or baseline cell has such a repetition (TRUE/FALSE, "
                         "no unit; kept only with analysis.include_deviated)",
    "deviations": "the repetition's settings that ran otherwise than declared (a count)",
    "settings_checked": "the repetition's declared settings read back and compared (a count)",
    "settings_verified": "of those, the ones equal to the declaration or within the kind's tolerance (a count)",
    "settings_not_read": "the repetition's declared settings that what ran gives no reading of (a count)",
    # query_timing
    "name": "the figure of a query row: ms (time per execution), rows, or a server counter's delta",
    "configuration": "the cell's values of the axes that vary",
    "value": "the median over repetitions of the repetitions' medians per execution: in ms for ms, a count for rows "
             "and counters",
    "relative": "value divided by the baseline configuration's (no unit; 1 at the baseline)",
    "verdict": "'within noise' when the ratio's 95% CI contains 1, else higher or lower",
    "executions": "executions of the query measured (a count)",
    "ratio_low": "the low end of the ratio's 95% CI (no unit)",
    "ratio_high": "the high end of the ratio's 95% CI (no unit)",
    "test": "how the ratio's CI was computed (the test named)",
    "baseline": "whether the row is the baseline configuration (TRUE/FALSE, no unit)",
    # insert_benchmark
    "phase": "the insert benchmark's phase: load, index, qr (queries with inserts at a rate), qp",
    "target_inserts_s": "the phase's target rate of inserted rows, in rows/s",
    "short_of_target": "SHORT when the phase's inserts/s fell below 95% of its target (no unit)",
    "inserts_s": "rows inserted per second over the phase, in rows/s, median over repetitions",
    "queries_s": "queries per second over the phase, in queries/s (a count per s), median over repetitions",
    "cpu_us_per_op": "CPU microseconds per operation (vmstat us + sy: the whole host)",
    "kb_read_per_op": "KB the device read per operation (iostat, the whole host)",
    "kb_written_per_op": "KB the device wrote per operation (iostat, the whole host)",
    "kb_written_per_insert": "KB the device wrote per inserted row",
    "cs_per_op": "context switches per operation (vmstat cs: the whole host)",
    "server_cpu_us_per_op": "CPU microseconds of the servers' own processes per operation",
    "server_kb_read_per_op": "KB the servers' own processes read from the block layer per operation",
    "server_kb_written_per_op": "KB the servers' own processes wrote to the block layer per operation",
    "server_kb_written_per_insert": "KB the servers' own processes wrote per inserted row",
    "db_mb": "the database's size at the phase's end, in MB",
    # openloop
    "rep": "the repetition (a count from 1)",
    "rate": "the target rate of the open-loop client, in transactions/s",
    "rate_percent": "the target rate as a share of the host's calibrated throughput, in %",
    "rate_calibrated_tps": "the host's calibrated throughput the rate is a share of, in transactions/s",
    "rate_achieved": "the rate the client achieved over the run, in transactions/s",
    "achieved_pct": "rate_achieved / rate, in %",
    "queue_max": "the client's longest queue of transactions waiting to start (a count)",
    "queue_end": "the client's queue at the run's end (a count)",
    "status": "whether the client kept up with its target rate (kept up, or short)",
    "latency from arrival": "an open-loop transaction's latency counted from its arrival, its time in the "
                            "client's queue included: the tool's p99 and mean over the run, in ms",
    # topology
    "lag_max_s": "the largest replica lag reported in the window, in s",
    "lag_end_s": "the largest replica lag at the window's last second, in s: a replica still behind at the "
                 "window's end (0: none reported a lag then)",
    "behind_max": "the most transactions a replica was behind the primary (a count)",
    "sync_off_s": "seconds of the window the primary did not wait for a replica (semi-sync off), in s",
    "unacked_tx": "commits no replica acknowledged (a count)",
    "flow_paused_share": "the share of the window Galera's flow control paused the cluster (0..1)",
    "rtt_client_ms": "the measured round trip from the client to the server, in ms",
    "rtt_node_ms": "the measured round trip between nodes, in ms",
}
DEFINITIONS |= {name: sentence for name, sentence in STATISTICS.items() if name not in DEFINITIONS}

# What each plot draws, with the units of its axes (results/plots/<name>.png).
PLOTS = {
    "timeseries_steady": "each repetition's per-second throughput (transactions/s or IOPS) and, beside it on the "
                         "same seconds, its per-second latency in ms (fio: each second's mean; sysbench: each "
                         "second's p95), the steady-state window shaded, stalls marked; x: second of the window (s)",
    "violin": "the distribution of each cell's per-second throughput (transactions/s or IOPS) in its steady-state "
              "windows; boxes: quartiles",
    "ci_vs_threads": "the median per-second throughput and latency (ms) against threads (log2 scale), ribbons: "
                     "the medians' 95% bootstrap CI",
    "ratio_heatmap": "each cell's median throughput divided by its baseline cell's (no unit), within-noise "
                     "ratios marked",
    "latency_percentiles": "the tools' own latency percentiles over each whole run, in ms (log scale), against "
                           "the percentile (%, spaced by nines)",
    "throughput_vs_threads": "the tool's own IOPS over the whole run against threads, mean over repetitions, "
                             "bars: min and max",
    "latency_vs_threads": "the tool's own mean and 95th percentile latency over the whole run (ms) against "
                          "threads, mean over repetitions",
    "jitter": "every per-second IOPS of each cell (points), its median (bar)",
    "boxplot": "the quartiles of each cell's per-second IOPS",
    "tps_vs_memory": "the tool's final transactions/s against the memory the engine caches in, median over "
                     "repetitions",
    "io_per_txn": "device KB read and written per transaction (iostat) against memory",
    "cpu": "vmstat's CPU time (%, user, system, IO wait) by memory and engine, mean over the window",
    "datadir": "the data directory's size (MB) over the run",
    "jitter_memory": "every per-second transactions/s of each cell by memory and engine",
    "boxplot_memory": "the quartiles of each cell's per-second transactions/s by memory and engine",
    "timeseries": "each database cell's per-second transactions/s over the measured window (s), stalls marked",
    "tps_vs_memory_by_version": "the median per-second transactions/s of the steady-state windows against memory, "
                                "one line per server version",
    "insert_benchmark": "each phase's figures relative to the baseline configuration (= 1.0, no unit)",
    "query_timing": "the median time per execution (ms) and counter deltas per execution of each configuration",
    "openloop_p99": "the 99th percentile latency of each second (ms), time in the client's queue included",
    "openloop_queue": "the client's queue of transactions waiting to start, each second (a count)",
    "replication": "per second: the client's transactions/s and latency (each second's p95, ms) on top, then per "
                   "node: replica lag (s), "
                   "transactions behind the primary (a count), whether "
                   "the primary waited for a replica (1/0), Galera's flow-control pause (share of the second)",
}

RATIO = re.compile(r"^[^/\s]+/[^/\s]+$")  # "xfs/ext4"


def definition(name: str) -> str | None:
    """The sentence for a figure's name: its own, a ratio's, or its metric's and its statistic's."""
    if name in DEFINITIONS:
        return DEFINITIONS[name]
    if RATIO.match(name):
        return DEFINITIONS["ratio"]
    metric, _, statistic = name.rpartition(" ")
    if metric in METRICS and statistic in STATISTICS:
        return f"{STATISTICS[statistic]}; the metric: {METRICS[metric]}"
    if name.endswith(" verdict") and RATIO.match(name.removesuffix(" verdict")):
        return DEFINITIONS["verdict"]
    return None


def figures(headers: list[str], not_figures: set[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(name, sentence) for every header that is a figure, each once in order of first appearance, and
    the names that have no definition. not_figures: the study's axes and their values."""
    defined, missing = [], []
    for name in dict.fromkeys(headers):
        if name in not_figures or not name:
            continue
        sentence = definition(name)
        if sentence:
            defined.append((name, sentence))
        else:
            missing.append(name)
    return defined, missing
