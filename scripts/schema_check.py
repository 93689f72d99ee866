#!/usr/bin/python3
"""Checks YAML files against pushreporter's JSON Schema, as an editor would (SPEC §14).

usage: schema_check.py SCHEMA [--def NAME] FILE...

Reads each file with YAML 1.2's core schema, as yaml-language-server does (`true`/`false` are
booleans, `30` a number, `off` and `yes` text), the !env, !file and !credential tags as text,
and validates it with a real JSON Schema validator (python3-jsonschema, draft 2020-12). With
--def NAME, each file is checked against $defs/NAME (a use: template is `--def template`).
Prints `FILE: at PATH: MESSAGE` for each problem; exits 1 when there is one.
"""
import json
import re
import sys

import jsonschema
import yaml


class Core12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's core schema instead of 1.1's implicit types."""


Core12Loader.yaml_implicit_resolvers = {}
for tag, pattern, first in [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", list("~nN") + [""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     list("-+0123456789.")),
]:
    Core12Loader.add_implicit_resolver(tag, re.compile(pattern), first)


def _int(loader, node):
    text = loader.construct_scalar(node)
    return int(text, 0) if text.startswith(("0o", "0x")) else int(text)


Core12Loader.add_constructor("tag:yaml.org,2002:int", _int)
for name in ("!env", "!file", "!credential"):
    Core12Loader.add_constructor(name, lambda loader, node: loader.construct_scalar(node))


def main(arguments: list[str]) -> int:
    if len(arguments) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    schema = json.load(open(arguments[0], encoding="utf-8"))
    files = arguments[1:]
    if files[:1] == ["--def"]:
        schema = dict(schema, **{"$ref": f"#/$defs/{files[1]}"})
        for key in ("type", "properties", "additionalProperties"):
            schema.pop(key, None)
        files = files[2:]
    validator = jsonschema.Draft202012Validator(schema)
    problems = 0
    for path in files:
        with open(path, encoding="utf-8") as handle:
            document = yaml.load(handle, Loader=Core12Loader)
        for error in sorted(validator.iter_errors(document if document is not None else {}), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(part) for part in error.absolute_path) or "(the file)"
            print(f"{path}: at {where}: {error.message}")
            problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
