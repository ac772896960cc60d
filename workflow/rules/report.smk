# report: the summary page (results/index.html, summary.md) and the report's captions, from what the analysis wrote.

rule summary:
    localrule: True
    input:
        analysis=analysis_targets(),
        user=user_targets(),  # results/user/<stem>/outputs.json lists what each script wrote
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
