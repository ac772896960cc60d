# fetch a server version once; prepare a workload's dataset once into a filesystem image that runs restore from.


rule fetch_server:
    output:
        directory("resources/servers/{family}-{version}"),
    log:
        "results/logs/fetch/{family}-{version}.log",
    priority: STUDY.priority(0)  # before the runs that wait for it
    localrule: True  # it downloads: where snakemake runs
    resources:
        measure=1,  # never while a measurement runs
    script:
        "../scripts/fetch.py"


rule prepare:
    input:
        server_of_image,
    output:
        "resources/images/{image}.img",
    log:
        "results/logs/prepare/{image}.log",
    priority: STUDY.priority(0)
    resources:
        measure=1,
        sbatch=sbatch_options(None),  # on Slurm: a node to itself
    params:
        spec=image_spec,
    script:
        "../scripts/prepare.py"
