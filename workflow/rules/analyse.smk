# analyse: the R analysis (workflow/R, one function per rule, rule_<name>): long tables in, tables and plots out.
# Every rule runs where snakemake runs (localrule) and lists the library it sources, so an R edit reruns
# only the analysis.
PLOTS = "results/plots"


# The per-second samples of samples.parquet as binary columns (dbsweep/statistics_series.py): R reads
# them without parsing text (10 million samples: gunzip and parse of samples.csv.gz took half the rule).
rule statistics_series:
    input:
        samples_parquet=rules.aggregate.output.samples_parquet,
    output:
        temp(directory(f"{TABLES}/statistics_series")),
    log:
        "results/logs/statistics_series.log",
    localrule: True
    params:
        axes=STUDY.axes,
        # the last run's columns and row groups: a row group of the same bytes is copied, not decoded again
        cache="results/cache/statistics_series",
    script:
        "../scripts/statistics_series.py"


rule statistics:
    input:
        summary=rules.aggregate.output.summary,
        series=rules.statistics_series.output[0],
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        steady_state=report(f"{TABLES}/steady_state.csv", caption="../report/steady_state.rst", category="Tables"),
        cell_stats_csv=report(f"{TABLES}/cell_stats.csv", caption="../report/cell_stats.rst", category="Tables"),
        cell_stats_md=f"{TABLES}/cell_stats.md",
        comparisons_csv=report(f"{TABLES}/comparisons.csv", caption="../report/comparisons.rst", category="Tables"),
        comparisons_md=f"{TABLES}/comparisons.md",
    log:
        "results/logs/statistics.log",
    localrule: True
    threads: 2  # chunks of cells in forked R processes (workflow/R/statistics_tables.R, map_chunks)
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        baseline=STUDY.baseline,
        analysis=ANALYSIS,
        # per-cell figures of the last run, keyed by each cell's inputs: only changed cells are recomputed
        cache="results/cache/statistics",
    script:
        "../scripts/analysis.R"


rule tables:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        system=rules.aggregate.output.system,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        cells_csv=report(f"{TABLES}/cells.csv", caption="../report/cells.rst", category="Tables"),
        cells_md=f"{TABLES}/cells.md",
        saturation_csv=report(f"{TABLES}/saturation.csv", caption="../report/saturation.rst", category="Tables"),
        saturation_md=f"{TABLES}/saturation.md",
    log:
        "results/logs/tables.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule plots:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        throughput=report(f"{PLOTS}/throughput_vs_threads.png", caption="../report/throughput.rst", category="Plots"),
        latency=report(f"{PLOTS}/latency_vs_threads.png", caption="../report/latency.rst", category="Plots"),
        jitter=report(f"{PLOTS}/jitter.png", caption="../report/jitter.rst", category="Plots"),
        boxplot=report(f"{PLOTS}/boxplot.png", caption="../report/boxplot.rst", category="Plots"),
        skipped=f"{TABLES}/skipped_sweep_plots.csv",
    log:
        "results/logs/plots.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule db_tables:
    input:
        summary=rules.aggregate.output.summary,
        cell_stats_csv=rules.statistics.output.cell_stats_csv,
        comparisons_csv=rules.statistics.output.comparisons_csv,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        engine_memory_csv=report(
            f"{TABLES}/engine_memory.csv", caption="../report/engine_memory.rst", category="Tables"
        ),
        engine_memory_md=f"{TABLES}/engine_memory.md",
        binlog_csv=report(f"{TABLES}/binlog.csv", caption="../report/binlog.rst", category="Tables"),
        binlog_md=f"{TABLES}/binlog.md",
        efficiency_csv=report(f"{TABLES}/efficiency.csv", caption="../report/efficiency.rst", category="Tables"),
        efficiency_md=f"{TABLES}/efficiency.md",
    log:
        "results/logs/db_tables.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule db_plots:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        system=rules.aggregate.output.system,
        counters=rules.aggregate.output.counters,
        provenance=rules.aggregate.output.provenance,
        steady_state=rules.statistics.output.steady_state,
        events=rules.aggregate.output.events,
        library=R_LIBRARY,
    output:
        tps_memory=report(f"{PLOTS}/tps_vs_memory.png", caption="../report/tps_memory.rst", category="Plots"),
        io_per_txn=report(f"{PLOTS}/io_per_txn.png", caption="../report/io_per_txn.rst", category="Plots"),
        cpu=report(f"{PLOTS}/cpu.png", caption="../report/cpu.rst", category="Plots"),
        datadir=report(f"{PLOTS}/datadir.png", caption="../report/datadir.rst", category="Plots"),
        jitter_memory=report(f"{PLOTS}/jitter_memory.png", caption="../report/jitter_memory.rst", category="Plots"),
        boxplot_memory=report(f"{PLOTS}/boxplot_memory.png", caption="../report/boxplot_memory.rst", category="Plots"),
        timeseries=report(f"{PLOTS}/timeseries.png", caption="../report/timeseries.rst", category="Plots"),
    log:
        "results/logs/db_plots.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        analysis={"stall_share": ANALYSIS["stall_share"]},  # the legend of the time series
    script:
        "../scripts/analysis.R"


rule versions:
    input:
        summary=rules.aggregate.output.summary,
        cell_stats_csv=rules.statistics.output.cell_stats_csv,
        comparisons_csv=rules.statistics.output.comparisons_csv,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        versions_csv=report(f"{TABLES}/versions.csv", caption="../report/versions.rst", category="Tables"),
        versions_md=f"{TABLES}/versions.md",
        version_plot=report(
            f"{PLOTS}/tps_vs_memory_by_version.png", caption="../report/version_plot.rst", category="Plots"
        ),
    log:
        "results/logs/versions.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule tpcc_table:
    input:
        summary=rules.aggregate.output.summary,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        tpcc_csv=report(f"{TABLES}/tpcc.csv", caption="../report/tpcc.rst", category="Tables"),
        tpcc_md=f"{TABLES}/tpcc.md",
    log:
        "results/logs/tpcc.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule insert_benchmark:
    input:
        phases=rules.aggregate.output.phases,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        table_csv=report(f"{TABLES}/insert_benchmark.csv", caption="../report/insert_benchmark.rst", category="Tables"),
        table_md=f"{TABLES}/insert_benchmark.md",
        plot=report(f"{PLOTS}/insert_benchmark.png", caption="../report/insert_benchmark.rst", category="Plots"),
    log:
        "results/logs/insert_benchmark.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        baseline=STUDY.baseline,
        analysis=ANALYSIS,
    script:
        "../scripts/analysis.R"


rule query_timing:
    input:
        executions=rules.aggregate.output.executions,
        plans=rules.aggregate.output.plans,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        table_csv=report(f"{TABLES}/query_timing.csv", caption="../report/query_timing.rst", category="Tables"),
        table_md=f"{TABLES}/query_timing.md",
        plot=report(f"{PLOTS}/query_timing.png", caption="../report/query_timing.rst", category="Plots"),
    log:
        "results/logs/query_timing.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        baseline=STUDY.baseline,
        analysis=ANALYSIS,
    script:
        "../scripts/analysis.R"


rule openloop:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        table_csv=report(f"{TABLES}/openloop.csv", caption="../report/openloop.rst", category="Tables"),
        table_md=f"{TABLES}/openloop.md",
        p99=report(f"{PLOTS}/openloop_p99.png", caption="../report/openloop_p99.rst", category="Plots"),
        queue=report(f"{PLOTS}/openloop_queue.png", caption="../report/openloop_queue.rst", category="Plots"),
    log:
        "results/logs/openloop.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule topology:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        counters=rules.aggregate.output.counters,
        provenance=rules.aggregate.output.provenance,
        events=rules.aggregate.output.events,
        library=R_LIBRARY,
    output:
        table_csv=report(f"{TABLES}/topology.csv", caption="../report/topology.rst", category="Tables"),
        table_md=f"{TABLES}/topology.md",
        replication=report(f"{PLOTS}/replication.png", caption="../report/replication.rst", category="Plots"),
    log:
        "results/logs/topology.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule recovery:
    input:
        recovery=rules.aggregate.output.recovery,
        provenance=rules.aggregate.output.provenance,
        library=R_LIBRARY,
    output:
        table_csv=report(f"{TABLES}/recovery.csv", caption="../report/recovery.rst", category="Tables"),
        table_md=f"{TABLES}/recovery.md",
    log:
        "results/logs/recovery.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
    script:
        "../scripts/analysis.R"


rule figures:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        percentiles=rules.aggregate.output.percentiles,
        provenance=rules.aggregate.output.provenance,
        steady_state=rules.statistics.output.steady_state,
        cell_stats_csv=rules.statistics.output.cell_stats_csv,
        comparisons_csv=rules.statistics.output.comparisons_csv,
        events=rules.aggregate.output.events,
        sweep_skipped=sweep_skipped_plots,
        library=R_LIBRARY,
    output:
        **{
            kind: report(f"{PLOTS}/{kind}.png", caption=f"../report/{kind}.rst", category="Plots")
            for kind in STUDY.analysis["plots"]
        },
        skipped=f"{TABLES}/skipped_plots.csv",
    log:
        "results/logs/figures.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        analysis=ANALYSIS,
    script:
        "../scripts/analysis.R"


rule user_script:
    input:
        unpack(user_script_input),
    output:
        snakemake_report(
            directory("results/user/{stem}"),
            patterns=["{name}.png", "{name}.svg", "{name}.csv"],
            caption="../report/user_script.rst",
            category=STUDY.name,
            subcategory="Your own analysis",
        ),
    log:
        "results/logs/user/{stem}.log",
    wildcard_constraints:
        stem="|".join(map(re.escape, USER_SCRIPTS)) or "^$",
    localrule: True
    params:
        study=STUDY.name,
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        baseline=STUDY.baseline,
    script:
        "../scripts/user_script.py"
