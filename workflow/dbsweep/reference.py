"""Write docs/reference.md, the configuration reference, from the study schema.

The schema (workflow/schemas/config.schema.yaml) is what the loader validates against, so a reference
generated from it cannot drift from what a study may hold: every key, its type, default, allowed values
and description. Examples come from the YAML blocks of config/README.md (the prose guide to the same
keys) and the other docs, then the shipped studies, so the reference shows a key as the guide writes it. Run as

    PYTHONPATH=workflow .venv/bin/python -m dbsweep.reference          # (re)write docs/reference.md
    PYTHONPATH=workflow .venv/bin/python -m dbsweep.reference --check  # exit 1 when it is stale

tests/test_docs.py fails when the committed file differs from what this writes.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
# Where examples come from, first found first: the guide's YAML blocks, the other docs', then the shipped studies.
EXAMPLES = ("config/README.md", "docs/topologies.md", "docs/events.md", "docs/open-loop.md", "docs/devices.md",
            "README.md", "config/config.yaml", "config/studies/*.yaml")
OUT = ROOT / "docs" / "reference.md"
COMMAND = "PYTHONPATH=workflow .venv/bin/python -m dbsweep.reference"
NAME = "<name>"  # the path segment of a map whose keys the user chooses (filesystems.<name>.size)
ITEM = "[]"  # the path segment of a list's items (events.<name>[].at)
LONGEST_EXAMPLE = 110  # characters; a longer one would be a paragraph of YAML, not an example of one key

YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)


@dataclass
class Key:
    """One key of the schema, where it is and what its schema says."""
    path: str
    schema: dict
    required: bool


def keys(schema: dict, path: str = "", required: bool = False) -> list[Key]:
    """Every key below schema, depth first in the schema's own order (the order a study is written in)."""
    found = [Key(path, schema, required)] if path else []
    needed = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        found += keys(sub, f"{path}.{name}" if path else name, name in needed)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and path and _has_structure(extra):
        found += keys(extra, f"{path}.{NAME}")
    items = schema.get("items")
    if isinstance(items, dict) and (items.get("properties") or isinstance(items.get("additionalProperties"), dict)):
        found += [k for k in keys(items, path + ITEM) if k.path != path + ITEM]
    return found


def _has_structure(schema: dict) -> bool:
    """Whether a map's values are worth a section of their own: objects, lists, or described. A map of
    scalars (server options, a baseline) is said in its own type instead: `map of name to string`."""
    return bool(schema.get("description") or schema.get("properties") or schema.get("type") == "array"
                or isinstance(schema.get("additionalProperties"), dict))


def type_of(schema: dict) -> str:
    """The schema's type in words: `list of integer`, `map of name to object`, `one of: a, b`."""
    if "enum" in schema:
        return "one of " + ", ".join(f"`{yaml_text(v)}`" for v in schema["enum"])
    if schema.get("type") == "array" and "enum" in schema.get("items", {}):
        return "list of " + ", ".join(f"`{yaml_text(v)}`" for v in schema["items"]["enum"])
    if "oneOf" in schema:
        return " or ".join(type_of(s) for s in schema["oneOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        items = schema.get("items")
        return f"list of {type_of(items)}" if isinstance(items, dict) and items else "list"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
        return f"map of name to {type_of(schema['additionalProperties'])}"
    if kind == "object" and "properties" in schema:
        return "map"
    return kind or "any"


def limits(schema: dict) -> list[str]:
    """What the schema allows beyond the type: bounds, a pattern, sizes of lists and maps."""
    said = []
    for word, key in (("at least", "minimum"), ("above", "exclusiveMinimum"), ("at most", "maximum"),
                      ("below", "exclusiveMaximum"), ("at least {} items", "minItems"),
                      ("at least {} keys", "minProperties"), ):
        if key in schema:
            said.append(word.format(schema[key]) if "{}" in word else f"{word} {schema[key]}")
    if schema.get("minLength"):
        said.append("not empty" if schema["minLength"] == 1 else f"at least {schema['minLength']} characters")
    if schema.get("uniqueItems"):
        said.append("no value twice")
    if "pattern" in schema:
        said.append(f"matching `{schema['pattern']}`")
    items = schema.get("items")
    if isinstance(items, dict) and "enum" not in items and "oneOf" not in items:
        said += [f"each {limit}" for limit in limits(items)]
    return said


def yaml_text(value) -> str:
    """A value as YAML writes it on one line."""
    return yaml.safe_dump(value, default_flow_style=True, width=10_000, allow_unicode=True).strip().removesuffix(
        "\n...").removesuffix("...").strip()


def example_texts() -> list[str]:
    """The YAML documents examples are taken from, in EXAMPLES' order: a Markdown file's yaml blocks, a
    study file whole."""
    texts = []
    for pattern in EXAMPLES:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text()
            texts += YAML_BLOCK.findall(text) if path.suffix == ".md" else [text]
    return texts


def examples(texts: list[str], schema: dict) -> dict[str, str]:
    """The first example of each key path in texts (YAML documents), as `key: value` on one line."""
    found: dict[str, str] = {}
    for block in texts:
        try:
            doc = yaml.safe_load(block)
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict):
            _walk(doc, schema, "", found)
    return found


def _walk(node: dict, schema: dict, path: str, found: dict[str, str]) -> None:
    for name, value in node.items():
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        if name in properties:
            sub, where = properties[name], f"{path}.{name}" if path else name
        elif isinstance(extra, dict) and path:
            sub, where = extra, f"{path}.{NAME}"
        else:
            continue
        text = f"{name}: {yaml_text(value)}"
        if where not in found and len(text) <= LONGEST_EXAMPLE:
            found[where] = text
        if isinstance(value, dict):
            _walk(value, sub, where, found)
        elif isinstance(value, list) and isinstance(sub.get("items"), dict):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, sub["items"], where + ITEM, found)


def entry(key: Key, example: str | None) -> str:
    """The reference's section of one key."""
    schema = key.schema
    lines = [f"{'###' if '.' in key.path else '##'} `{key.path}`", ""]
    description = " ".join(str(schema.get("description", "")).split())
    if description:
        lines += [description, ""]
    lines.append(f"- type: {type_of(schema)}")
    said = limits(schema)
    if said:
        lines.append("- allowed: " + "; ".join(said))
    if key.required:
        lines.append("- required" + (f" (in `{key.path.rpartition('.')[0]}`)" if "." in key.path else ""))
    elif "default" in schema:
        lines.append(f"- default: `{yaml_text(schema['default'])}`")
    if example:
        lines.append(f"- example: `{example}`")
    return "\n".join(lines) + "\n"


def render(schema: dict | None = None, texts: list[str] | None = None) -> str:
    """The whole reference as Markdown."""
    schema = schema if schema is not None else yaml.safe_load(SCHEMA.read_text())
    shown = examples(texts if texts is not None else example_texts(), schema)
    every = keys(schema)
    head = [
        "# Configuration reference",
        "",
        f"Generated from `workflow/schemas/config.schema.yaml` by `{COMMAND}`; do not edit by hand.",
        "Every key a study file may hold, with its type, default, allowed values and an example (from the",
        "docs' YAML blocks or a shipped study). [config/README.md](../config/README.md) explains the keys with",
        "whole examples. "
        f"`{NAME}` stands for a name you choose, `{ITEM}` for each item of a list. Besides what the",
        "schema says, the loader refuses what a schema cannot say (an axis value naming no definition,",
        "options a tool or server refuses, a dataset that does not fit its filesystem), each in one line",
        "naming the key and the value.",
        "",
        " ".join(str(schema.get("description", "")).split()),
        "",
        "Top-level keys: " + ", ".join(f"[`{k.path}`](#{anchor(k.path)})" for k in every if "." not in k.path),
        "",
    ]
    body = [entry(key, shown.get(key.path)) for key in every]
    return "\n".join(head) + "\n" + "\n".join(body)


def anchor(path: str) -> str:
    """GitHub's anchor of the heading `## \\`path\\``."""
    return re.sub(r"[^a-z0-9_-]", "", path.lower())


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"dbsweep: {OUT.relative_to(ROOT)} is stale: regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(keys(yaml.safe_load(SCHEMA.read_text())))} keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
