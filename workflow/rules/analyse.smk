# aggregate, then the R analysis: long tables in, comparison tables and plots out.
from snakemake.io import report as snakemake_report

TABLES = "results/tables"
PLOTS = "results/plots"


def report(path, caption, category):
    """Snakemake's report(), with the study's name as the category (one per study) and Tables or
    Plots as its subcategory. Every caption ends by including results/report/provenance.rst
    (written by rule summary): the matrix, the host and the versions."""
    return snakemake_report(path, caption=caption, category=STUDY.name, subcategory=category)


rule aggregate:
    input:
        expand(
            "{rep_dir}/{name}",
            rep_dir=rep_dirs(),
            name=["run.json", "summary.json", "samples.csv", "system.csv", "counters.csv", "percentiles.csv"]
            + [f"{name}.csv" for name in workloads.tables()],
        ),
    output:
        summary=f"{TABLES}/summary.csv.gz",
        samples=f"{TABLES}/samples.csv.gz",
        system=f"{TABLES}/system.csv.gz",
        counters=f"{TABLES}/counters.csv.gz",
        **{name: f"{TABLES}/{name}.csv.gz" for name in workloads.tables()},  # the workloads' own tables
        percentiles=f"{TABLES}/percentiles.csv.gz",
        summary_parquet=f"{TABLES}/summary.parquet",
        samples_parquet=f"{TABLES}/samples.parquet",
        system_parquet=f"{TABLES}/system.parquet",
        counters_parquet=f"{TABLES}/counters.parquet",
        percentiles_parquet=f"{TABLES}/percentiles.parquet",
        provenance=f"{TABLES}/provenance.json",
        not_applicable=f"{TABLES}/not_applicable.csv",
    params:
        axes=STUDY.axes,
        study=STUDY.name,
        not_applicable=STUDY.not_applicable,
        rep_dirs=rep_dirs(),
    log:
        "results/logs/aggregate.log",
    script:
        "../scripts/aggregate.py"


rule tables:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/tables.R",
        common=f"{SCRIPTS}/common.R",
    output:
        cells_csv=report(f"{TABLES}/cells.csv", caption="../report/cells.rst", category="Tables"),
        cells_md=f"{TABLES}/cells.md",
        saturation_csv=report(f"{TABLES}/saturation.csv", caption="../report/saturation.rst", category="Tables"),
        saturation_md=f"{TABLES}/saturation.md",
    params:
        axes=STUDY.axes,
    log:
        "results/logs/tables.log",
    script:
        "../scripts/tables.R"


rule plots:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/plots.R",
        common=f"{SCRIPTS}/common.R",
    output:
        throughput=report(f"{PLOTS}/throughput_vs_threads.png", caption="../report/throughput.rst", category="Plots"),
        latency=report(f"{PLOTS}/latency_vs_threads.png", caption="../report/latency.rst", category="Plots"),
        jitter=report(f"{PLOTS}/jitter.png", caption="../report/jitter.rst", category="Plots"),
        boxplot=report(f"{PLOTS}/boxplot.png", caption="../report/boxplot.rst", category="Plots"),
    params:
        axes=STUDY.axes,
    log:
        "results/logs/plots.log",
    script:
        "../scripts/plots.R"


rule db_tables:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/db_tables.R",
        common=f"{SCRIPTS}/common.R",
    output:
        engine_memory_csv=report(f"{TABLES}/engine_memory.csv", caption="../report/engine_memory.rst", category="Tables"),
        engine_memory_md=f"{TABLES}/engine_memory.md",
        binlog_csv=report(f"{TABLES}/binlog.csv", caption="../report/binlog.rst", category="Tables"),
        binlog_md=f"{TABLES}/binlog.md",
        efficiency_csv=report(f"{TABLES}/efficiency.csv", caption="../report/efficiency.rst", category="Tables"),
        efficiency_md=f"{TABLES}/efficiency.md",
    params:
        axes=STUDY.axes,
        baseline=STUDY.baseline,
    log:
        "results/logs/db_tables.log",
    script:
        "../scripts/db_tables.R"


rule db_plots:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/db_plots.R",
        common=f"{SCRIPTS}/common.R",
        stats=f"{SCRIPTS}/stats.R",
    output:
        tps_memory=report(f"{PLOTS}/tps_vs_memory.png", caption="../report/tps_memory.rst", category="Plots"),
        io_per_txn=report(f"{PLOTS}/io_per_txn.png", caption="../report/io_per_txn.rst", category="Plots"),
        cpu=report(f"{PLOTS}/cpu.png", caption="../report/cpu.rst", category="Plots"),
        datadir=report(f"{PLOTS}/datadir.png", caption="../report/datadir.rst", category="Plots"),
        jitter_memory=report(f"{PLOTS}/jitter_memory.png", caption="../report/jitter_memory.rst", category="Plots"),
        boxplot_memory=report(f"{PLOTS}/boxplot_memory.png", caption="../report/boxplot_memory.rst", category="Plots"),
        timeseries=report(f"{PLOTS}/timeseries.png", caption="../report/timeseries.rst", category="Plots"),
    params:
        axes=STUDY.axes,
        baseline=STUDY.baseline,
        analysis=STUDY.analysis,
    log:
        "results/logs/db_plots.log",
    script:
        "../scripts/db_plots.R"


rule versions:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/versions.R",
        common=f"{SCRIPTS}/common.R",
    output:
        versions_csv=report(f"{TABLES}/versions.csv", caption="../report/versions.rst", category="Tables"),
        versions_md=f"{TABLES}/versions.md",
        noise_csv=report(f"{TABLES}/version_noise.csv", caption="../report/version_noise.rst", category="Tables"),
        noise_md=f"{TABLES}/version_noise.md",
        version_plot=report(
            f"{PLOTS}/tps_vs_memory_by_version.png", caption="../report/version_plot.rst", category="Plots"
        ),
    params:
        axes=STUDY.axes,
        baseline=STUDY.baseline,
    log:
        "results/logs/versions.log",
    script:
        "../scripts/versions.R"


rule tpcc_table:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/tpcc.R",
        common=f"{SCRIPTS}/common.R",
    output:
        tpcc_csv=report(f"{TABLES}/tpcc.csv", caption="../report/tpcc.rst", category="Tables"),
        tpcc_md=f"{TABLES}/tpcc.md",
    params:
        axes=STUDY.axes,
    log:
        "results/logs/tpcc.log",
    script:
        "../scripts/tpcc.R"


rule insert_benchmark:
    input:
        phases=rules.aggregate.output.phases,
        provenance=rules.aggregate.output.provenance,
        script=f"{SCRIPTS}/insert_benchmark.R",
        common=f"{SCRIPTS}/common.R",
    output:
        table_csv=report(f"{TABLES}/insert_benchmark.csv", caption="../report/insert_benchmark.rst", category="Tables"),
        table_md=f"{TABLES}/insert_benchmark.md",
        plot=report(f"{PLOTS}/insert_benchmark.png", caption="../report/insert_benchmark.rst", category="Plots"),
    params:
        axes=STUDY.axes,
        baseline=STUDY.baseline,
    log:
        "results/logs/insert_benchmark.log",
    script:
        "../scripts/insert_benchmark.R"


rule query_timing:
    input:
        executions=rules.aggregate.output.executions,
        provenance=rules.aggregate.output.provenance,
        script=f"{SCRIPTS}/query_timing.R",
        common=f"{SCRIPTS}/common.R",
    output:
        table_csv=report(f"{TABLES}/query_timing.csv", caption="../report/query_timing.rst", category="Tables"),
        table_md=f"{TABLES}/query_timing.md",
        plot=report(f"{PLOTS}/query_timing.png", caption="../report/query_timing.rst", category="Plots"),
    params:
        axes=STUDY.axes,
        baseline=STUDY.baseline,
    log:
        "results/logs/query_timing.log",
    script:
        "../scripts/query_timing.R"


rule openloop:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/openloop.R",
        common=f"{SCRIPTS}/common.R",
    output:
        table_csv=report(f"{TABLES}/openloop.csv", caption="../report/openloop.rst", category="Tables"),
        table_md=f"{TABLES}/openloop.md",
        p99=report(f"{PLOTS}/openloop_p99.png", caption="../report/openloop_p99.rst", category="Plots"),
        queue=report(f"{PLOTS}/openloop_queue.png", caption="../report/openloop_queue.rst", category="Plots"),
    params:
        axes=STUDY.axes,
    log:
        "results/logs/openloop.log",
    script:
        "../scripts/openloop.R"


rule statistics:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/statistics.R",
        common=f"{SCRIPTS}/common.R",
        stats=f"{SCRIPTS}/stats.R",
    output:
        steady_state=report(f"{TABLES}/steady_state.csv", caption="../report/steady_state.rst", category="Tables"),
        cell_stats_csv=report(f"{TABLES}/cell_stats.csv", caption="../report/cell_stats.rst", category="Tables"),
        cell_stats_md=f"{TABLES}/cell_stats.md",
        comparisons_csv=report(f"{TABLES}/comparisons.csv", caption="../report/comparisons.rst", category="Tables"),
        comparisons_md=f"{TABLES}/comparisons.md",
    params:
        axes=STUDY.axes,
        baseline=STUDY.baseline,
        analysis=STUDY.analysis,
    log:
        "results/logs/statistics.log",
    script:
        "../scripts/statistics.R"


rule figures:
    input:
        **rules.aggregate.output,
        **rules.statistics.output,
        script=f"{SCRIPTS}/figures.R",
        common=f"{SCRIPTS}/common.R",
        stats=f"{SCRIPTS}/stats.R",
    output:
        **{
            kind: report(f"{PLOTS}/{kind}.png", caption=f"../report/{kind}.rst", category="Plots")
            for kind in STUDY.analysis["plots"]
        },
        skipped=f"{TABLES}/skipped_plots.csv",
    params:
        axes=STUDY.axes,
        analysis=STUDY.analysis,
    log:
        "results/logs/figures.log",
    script:
        "../scripts/figures.R"


rule summary:
    input:
        analysis=analysis_targets(),
        provenance=rules.aggregate.output.provenance,
        not_applicable=rules.aggregate.output.not_applicable,
    output:
        html="results/index.html",
        md="results/summary.md",
        caption="results/report/provenance.rst",
        front="results/report/study.rst",
    params:
        study=summary_study(),
    log:
        "results/logs/summary.log",
    script:
        "../scripts/summary.py"
