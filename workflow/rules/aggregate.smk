# aggregate: every repetition's tidy files -> the long tables (results/tables/*.csv.gz, *.parquet).

TABLES = "results/tables"

rule aggregate:
    localrule: True  # reads every repetition's files: where snakemake runs
    input:
        expand(
            "{rep_dir}/{name}",
            rep_dir=rep_dirs(),
            name=["run.json", "summary.json", "samples.csv", "system.csv", "counters.csv", "percentiles.csv",
                  "events.csv", "recovery.csv"]
            + [f"{name}.csv" for name in workloads.tables()],
        ),
    output:
        summary=f"{TABLES}/summary.csv.gz",
        samples=f"{TABLES}/samples.csv.gz",
        system=f"{TABLES}/system.csv.gz",
        counters=f"{TABLES}/counters.csv.gz",
        **{name: f"{TABLES}/{name}.csv.gz" for name in workloads.tables()},  # the workloads' own tables
        percentiles=f"{TABLES}/percentiles.csv.gz",
        events=f"{TABLES}/events.csv.gz",
        recovery=f"{TABLES}/recovery.csv.gz",
        summary_parquet=f"{TABLES}/summary.parquet",
        samples_parquet=f"{TABLES}/samples.parquet",
        system_parquet=f"{TABLES}/system.parquet",
        counters_parquet=f"{TABLES}/counters.parquet",
        percentiles_parquet=f"{TABLES}/percentiles.parquet",
        provenance=f"{TABLES}/provenance.json",
        not_applicable=f"{TABLES}/not_applicable.csv",
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        study=STUDY.name,
        not_applicable=STUDY.not_applicable,
        rep_dirs=rep_dirs(),
    log:
        "results/logs/aggregate.log",
    script:
        "../scripts/aggregate.py"


# canary_table: the canary's runs as a series of their own (results/tables/canary.csv, dbsweep/canary.py).
rule canary_table:
    localrule: True
    input:
        CANARY_RUNS,
    output:
        f"{TABLES}/canary.csv",
    params:
        every=STUDY.canary_every,
        total=len(STUDY.cells) * STUDY.repetitions,
    log:
        "results/logs/canary_table.log",
    script:
        "../scripts/canary.py"
