"""YAML for a bare GPU worker: PyYAML's safe_load when installed, otherwise a small
parser of the subset that suites and the hardware catalog use, so that the harness
runs with torch and pyarrow alone.

The subset: block mappings and sequences (items may be mappings), flow collections
(`[a, b]`, `{k: v}`, nested), comments, and plain or quoted scalars resolved as
PyYAML resolves them (int, float, true/false, null). No anchors, tags, multi-line
strings or documents. tests/test_yaml_subset.py checks that every shipped file parses to
exactly what PyYAML gives.
"""
from __future__ import annotations

import re
from typing import Any

_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
# PyYAML's (YAML 1.1) float: a dot is required, an exponent needs its sign.
_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9_]+)(?:[eE][-+][0-9]+)?$")


class YamlSubsetError(ValueError):
    pass


def safe_load(text: str, source: str = "<string>") -> Any:
    try:
        import yaml
    except ImportError:
        return _Parser(text, source).document()
    return yaml.safe_load(text)


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def scalar(token: str) -> Any:
    t = token.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        return t[1:-1]
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if _INT.match(t):
        return int(t.replace("_", ""))
    if _FLOAT.match(t):
        return float(t.replace("_", ""))
    return t


class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.lines: list[tuple[int, str, int]] = []  # (indent, content, line number)
        for no, raw in enumerate(text.splitlines(), 1):
            content = _strip_comment(raw)
            if content.strip():
                self.lines.append((len(content) - len(content.lstrip(" ")), content.strip(), no))

    def fail(self, no: int, why: str) -> YamlSubsetError:
        return YamlSubsetError(f"{self.source}:{no}: {why} (install PyYAML for full YAML)")

    def document(self) -> Any:
        if not self.lines:
            return None
        value, i = self.block(0, self.lines[0][0])
        if i != len(self.lines):
            raise self.fail(self.lines[i][2], "unexpected indentation")
        return value

    def block(self, i: int, indent: int) -> tuple[Any, int]:
        content = self.lines[i][1]
        if content == "-" or content.startswith("- "):
            return self.sequence(i, indent)
        return self.mapping(i, indent)

    def sequence(self, i: int, indent: int) -> tuple[list, int]:
        out = []
        while i < len(self.lines) and self.lines[i][0] == indent and (
                self.lines[i][1] == "-" or self.lines[i][1].startswith("- ")):
            _, content, no = self.lines[i]
            item = content[1:].strip()
            if not item:
                if i + 1 < len(self.lines) and self.lines[i + 1][0] > indent:
                    value, i = self.block(i + 1, self.lines[i + 1][0])
                else:
                    value, i = None, i + 1
            elif _split_key(item) is not None:  # "- key: value" starts a mapping
                self.lines[i] = (indent + len(content) - len(item), item, no)
                value, i = self.mapping(i, self.lines[i][0])
            else:
                value, i = self.flow(item, no), i + 1
            out.append(value)
        return out, i

    def mapping(self, i: int, indent: int) -> tuple[dict, int]:
        out: dict = {}
        while i < len(self.lines) and self.lines[i][0] == indent:
            _, content, no = self.lines[i]
            kv = _split_key(content)
            if kv is None:
                raise self.fail(no, f"expected 'key: value', got {content!r}")
            key, rest = kv
            i += 1
            if rest:
                out[key] = self.flow(rest, no)
            elif i < len(self.lines) and (self.lines[i][0] > indent or (
                    self.lines[i][0] == indent and self.lines[i][1].startswith("- "))):
                out[key], i = self.block(i, self.lines[i][0])
            else:
                out[key] = None
        return out, i

    def flow(self, text: str, no: int) -> Any:
        if not text.startswith(("[", "{")):
            return scalar(text)
        value, pos = self._flow_value(text, 0, no)
        if text[pos:].strip():
            raise self.fail(no, f"unexpected text after a flow collection: {text[pos:]!r}")
        return value

    def _flow_value(self, s: str, pos: int, no: int) -> tuple[Any, int]:
        while pos < len(s) and s[pos] == " ":
            pos += 1
        if pos < len(s) and s[pos] in "[{":
            close = "]" if s[pos] == "[" else "}"
            items: list = []
            mapping: dict = {}
            pos += 1
            while True:
                while pos < len(s) and s[pos] in " ,":
                    pos += 1
                if pos >= len(s):
                    raise self.fail(no, f"unclosed {s[0]!r}")
                if s[pos] == close:
                    return (items if close == "]" else mapping), pos + 1
                if close == "}":
                    end = _token_end(s, pos, ":")
                    key = scalar(s[pos:end])
                    value, pos = self._flow_value(s, end + 1, no)
                    mapping[key] = value
                else:
                    value, pos = self._flow_value(s, pos, no)
                    items.append(value)
        end = _token_end(s, pos, ",]}")
        return scalar(s[pos:end]), end


def _token_end(s: str, pos: int, stops: str) -> int:
    quote = None
    while pos < len(s):
        ch = s[pos]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in stops and (ch != ":" or pos + 1 >= len(s) or s[pos + 1] == " "):
            return pos
        pos += 1
    return pos


def _split_key(content: str) -> tuple[str, str] | None:
    """('key', 'rest') for 'key: rest' or 'key:', outside quotes and flow collections."""
    if content.startswith(("[", "{", "\"", "'")) and not re.match(r"^(\"[^\"]*\"|'[^']*'):( |$)", content):
        return None
    end = _token_end(content, 0, ":")
    if end >= len(content):
        return None
    key = scalar(content[:end])
    return key, content[end + 1:].strip()
