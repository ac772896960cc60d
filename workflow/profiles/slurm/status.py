#!/usr/bin/env python3
"""The Slurm profile's status command: prints running, success or failed for one Slurm job id, as
Snakemake's generic cluster executor asks (`status.py JOBID`). scontrol knows a job until MinJobAge
after its end; sacct (where the cluster keeps accounting) after that. A job neither knows any more is
reported failed: Snakemake then checks its outputs and retries it (profile: retries)."""
import subprocess
import sys

ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
          "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "PREEMPTED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}


def state(job: str) -> str | None:
    shown = subprocess.run(["scontrol", "show", "job", "--oneliner", job], capture_output=True, text=True).stdout
    for word in shown.split():
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    accounted = subprocess.run(["sacct", "--allocations", "--noheader", "--parsable2", "--jobs", job,
                                "--format", "State"], capture_output=True, text=True).stdout.split()
    return accounted[0] if accounted else None  # e.g. "CANCELLED by 0": its first word


if __name__ == "__main__":
    found = state(sys.argv[1])
    print("running" if found in ACTIVE else "success" if found == "COMPLETED" else "failed")
