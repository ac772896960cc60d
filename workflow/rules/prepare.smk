# fetch a server version once; prepare a workload's dataset once into a filesystem image that runs restore from.


rule fetch_server:
    localrule: True  # it downloads: where snakemake runs
    output:
        directory("resources/servers/{family}-{version}"),
    log:
        "results/logs/fetch/{family}-{version}.log",
    resources:
        measure=1,  # never while a measurement runs
    priority: STUDY.priority(0)  # before the runs that wait for it
    script:
        "../scripts/fetch.py"


rule prepare:
    input:
        server_of_image,
    output:
        "resources/images/{image}.img",
    params:
        spec=image_spec,
    log:
        "results/logs/prepare/{image}.log",
    resources:
        measure=1,
        sbatch=sbatch_options(None),  # on Slurm: a node to itself
    priority: STUDY.priority(0)
    script:
        "../scripts/prepare.py"
