"""Check the study files a `./dbsweep run` names before Snakemake reads them.

Snakemake loads --configfile itself, and says only "Config file is not valid JSON or
YAML" for a syntax error, or "must be given ... with keys at top level" for an empty
file: neither the file nor the line. This reads each file first and, when one cannot
be a study, prints one line naming the file, the line and YAML's own reason, and
exits 1. Run as `python -m dbsweep.configfile SNAKEMAKE_ARGS…` (the dbsweep script).

It also refuses what Snakemake would read without a word or not survive: a key given
twice in one mapping (YAML keeps the last one silently), a file that is not a regular
file (/dev/zero, a directory) or is over MAX_BYTES, and nesting too deep for the parser.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import yaml

DEFAULT = "config/config.yaml"  # the Snakefile's configfile when the command line names none
OPTIONS = ("--configfile", "--configfiles")
MAX_BYTES = 2**20  # a study is a few kB; the largest shipped one is under 10 kB


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping names the same key twice."""


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (a merge `<<:` may still override)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:
                    continue  # an unhashable key: SafeLoader's own error says so
                if earlier is not key_node:
                    raise DuplicateKey(None, None, f"duplicate key {key!r} (first at line "
                                       f"{earlier.start_mark.line + 1}); YAML would keep only the last: "
                                       "remove one", key_node.start_mark)
        return super().construct_mapping(node, deep)


def load_yaml(text: str):
    """The YAML document in text, read as yaml.safe_load does but refusing duplicate keys."""
    return yaml.load(text, Loader=StrictLoader)


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
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a directory" if stat.S_ISDIR(info.st_mode) else
                    "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a pipe or socket")
            return f"{path}: not a regular file ({kind}); give the study's YAML file"
        if info.st_size > MAX_BYTES:
            return (f"{path}: {info.st_size} bytes, over the {MAX_BYTES} bytes a study file may have; "
                    "is it the study's YAML file?")
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        return f"{path}: cannot be read: {getattr(error, 'strerror', None) or error}"
    try:
        data = load_yaml(text)
    except DuplicateKey as error:
        mark = error.problem_mark
        return f"{path}:{mark.line + 1}:{mark.column + 1}: {error.problem}"
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        return f"{where}: YAML syntax error: {error.problem or error.context}"
    except yaml.YAMLError as error:
        return f"{path}: YAML error: {str(error).splitlines()[0]}"
    except RecursionError:
        return f"{path}: nested too deeply for the YAML parser (a study nests a few levels)"
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
