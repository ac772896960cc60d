# report: the summary page (results/index.html, summary.md), the explore page (results/explore.html) and the report's captions, from what the analysis wrote.


rule explore:
    input:
        samples=rules.aggregate.output.samples_parquet,
        system=rules.aggregate.output.system_parquet,
        counters=rules.aggregate.output.counters_parquet,
        steady_state=steady_state_of_study(),
    output:
        "results/explore.html",
    log:
        "results/logs/explore.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        study=STUDY.name,
    script:
        "../scripts/explore.py"


rule summary:
    input:
        analysis=analysis_targets(),
        canary=canary_table(),  # results/tables/canary.csv with a canary
        explore=rules.explore.output,
        user=user_targets(),  # results/user/<stem>/outputs.json lists what each script wrote
        provenance=rules.aggregate.output.provenance,
        not_applicable=rules.aggregate.output.not_applicable,
        rounds=round_verdicts,  # with repeat_until: each round's noise (dbsweep/rounds.py)
    output:
        html="results/index.html",
        md="results/summary.md",
        caption="results/report/provenance.rst",
        front="results/report/study.rst",
    log:
        "results/logs/summary.log",
    localrule: True
    params:
        study=summary_params,
    script:
        "../scripts/summary.py"
