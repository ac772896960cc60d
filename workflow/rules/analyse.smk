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
            name=["run.json", "summary.json", "samples.csv", "system.csv", "counters.csv"],
        ),
    output:
        summary=f"{TABLES}/summary.csv.gz",
        samples=f"{TABLES}/samples.csv.gz",
        system=f"{TABLES}/system.csv.gz",
        counters=f"{TABLES}/counters.csv.gz",
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
