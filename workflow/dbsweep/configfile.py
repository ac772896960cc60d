"""Check the study files a `./dbsweep run` names before Snakemake reads them.

Snakemake loads --configfile itself, and says only "Config file is not valid JSON or
YAML" for a syntax error, or "must be given ... with keys at top level" for an empty
file: neither the file nor the line. This reads each file first and, when one cannot
be a study, prints one line naming the file, the line and YAML's own reason, and
exits 1. Run as `python -m dbsweep.configfile SNAKEMAKE_ARGS…` (the dbsweep script).
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

DEFAULT = "config/config.yaml"  # the Snakefile's configfile when the command line names none
OPTIONS = ("--configfile", "--configfiles")


def named(argv: list[str]) -> list[str]:
    """The config files of a snakemake command line: `--configfile a b`, `--configfile=a`, or the default."""
    files, taking = [], False
    for arg in argv:
        option, eq, value = arg.partition("=")
        if option in OPTIONS:
            taking = not eq
            if eq:
                files.append(value)
        elif taking and not arg.startswith("-"):
            files.append(arg)
        else:
            taking = False
    return files or ([DEFAULT] if Path(DEFAULT).exists() else [])


def problem(path: str) -> str | None:
    """Why the file cannot be a study, on one line naming the file (and the line), or None."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        return f"{path}: cannot be read: {getattr(error, 'strerror', None) or error}"
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        return f"{where}: YAML syntax error: {error.problem or error.context}"
    except yaml.YAMLError as error:
        return f"{path}: YAML error: {str(error).splitlines()[0]}"
    if data is None:
        return f"{path}: empty file (a study needs at least study:, axes: and workloads:)"
    if not isinstance(data, dict):
        return f"{path}:1: the study is a {type(data).__name__}, not a mapping of keys (study:, axes:, workloads: …)"
    return None


def main(argv: list[str]) -> int:
    for path in named(argv):
        found = problem(path)
        if found:
            print(f"dbsweep: config error: {found}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
