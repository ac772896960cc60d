# prepare: load a workload's file set once into a filesystem image that runs restore from.


rule prepare:
    output:
        "resources/images/{image}.img",
    params:
        spec=image_spec,
    log:
        "results/logs/prepare/{image}.log",
    resources:
        measure=1,
    script:
        "../scripts/prepare.py"
