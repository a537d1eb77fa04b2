"""A reader for the INI dialect upstream parses `cloud.conf` with (Go's gcfg, git-config style).

Operators keep their `cloud.conf` when they switch to pyccm, so the file must mean exactly
what it meant upstream:

* sections `[name]` and `[name "subsection"]`; section and key names are case-insensitive,
  subsection names are not; a section may appear several times (its keys merge);
* `key = value`, comments after `;` or `#` (outside quotes), `\\` at the end of a line
  continues the value; double quotes protect whitespace and comment characters, with the
  escapes `\\"`, `\\\\`, `\\n`, `\\t`, `\\b`; unquoted leading and trailing whitespace is dropped;
* a key without `=` is a "blank" value: `true` for a boolean, a reset for a multi-valued key,
  an error for anything else;
* booleans are `true/yes/on/1` and `false/no/off/0`, any case;
* durations follow Go's `time.ParseDuration` (`1m30s`, `500ms`; a bare number other than 0
  needs a unit);
* unknown sections and keys are ignored, as upstream's `gcfg.FatalOnly` does.

Errors are `ConfigError`s naming the file, line, section and key. A syntax error never
quotes the offending line, because that line may hold a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pyccm.flags.durations import parse_duration
from pyccm.provider.errors import ConfigError

# Keys whose values are credentials: never echoed in an error message.
SECRET_KEYS = frozenset({"password", "token", "trustee-password", "application-credential-secret"})

_SECTION = re.compile(r'^\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]\s*(?:[;#].*)?$')
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)\s*(=)?")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "b": "\b"}
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class RawValue:
    """One assignment: `text` is None for a blank key (no `=`)."""

    text: str | None
    line: int


SectionKey = tuple[str, str | None]


@dataclass
class IniDocument:
    path: Path
    # (lower-cased section name, subsection) -> lower-cased key -> assignments in file order
    sections: dict[SectionKey, dict[str, list[RawValue]]] = field(default_factory=dict)

    def subsections(self, name: str) -> list[str]:
        return [sub for (sec, sub) in self.sections if sec == name.lower() and sub is not None]


def _unquote_subsection(raw: str) -> str:
    return re.sub(r"\\(.)", r"\1", raw)


def _scan_value(text: str, *, where: str) -> tuple[str, bool]:
    """Decode a value; returns it and whether the line ends with a continuation."""
    out: list[str] = []
    pending_space = ""
    quoted = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 == len(text):
                return "".join(out), True
            escaped = _ESCAPES.get(text[index + 1])
            if escaped is None:
                raise ConfigError(f"{where}: invalid escape sequence in value")
            out.append(pending_space + escaped)
            pending_space = ""
            index += 2
            continue
        if char == '"':
            quoted = not quoted
            out.append(pending_space)
            pending_space = ""
        elif not quoted and char in ";#":
            break
        elif not quoted and char.isspace():
            # Internal unquoted whitespace is kept, trailing whitespace is not.
            pending_space += char
        else:
            out.append(pending_space + char)
            pending_space = ""
        index += 1
    if quoted:
        raise ConfigError(f"{where}: unterminated quoted value")
    return "".join(out), False


def parse_ini(text: str, *, path: Path) -> IniDocument:
    document = IniDocument(path=path)
    current: dict[str, list[RawValue]] | None = None
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].strip()
        index += 1
        if not line or line[0] in ";#":
            continue
        if line.startswith("["):
            match = _SECTION.match(line)
            if match is None:
                raise ConfigError(f"{path}:{number}: malformed section header")
            sub = None if match.group(2) is None else _unquote_subsection(match.group(2))
            current = document.sections.setdefault((match.group(1).lower(), sub), {})
            continue
        key_match = _KEY.match(line)
        if key_match is None:
            raise ConfigError(f"{path}:{number}: expected 'key = value'")
        if current is None:
            raise ConfigError(f"{path}:{number}: key outside of any section")
        key = key_match.group(1).lower()
        rest = line[key_match.end() :]
        if key_match.group(2) is None:
            if rest.strip() and rest.strip()[0] not in ";#":
                raise ConfigError(f"{path}:{number}: expected '=' after {key}")
            current.setdefault(key, []).append(RawValue(text=None, line=number))
            continue
        value, continued = _scan_value(rest.strip(), where=f"{path}:{number}: {key}")
        while continued and index < len(lines):
            more, continued = _scan_value(lines[index].strip(), where=f"{path}:{index + 1}: {key}")
            value, index = value + more, index + 1
        current.setdefault(key, []).append(RawValue(text=value, line=number))
    return document


class Section:
    """Typed access to one section: each reader returns the default when the key is absent."""

    def __init__(self, document: IniDocument, name: str, subsection: str | None = None) -> None:
        self._document = document
        self._title = name if subsection is None else f'{name} "{subsection}"'
        self._values = document.sections.get((name.lower(), subsection), {})

    def _where(self, key: str, value: RawValue) -> str:
        place = f"{self._document.path}:{value.line}" if value.line else str(self._document.path)
        return f"{place}: [{self._title}] {key}"

    def _shown(self, key: str, text: str | None) -> str:
        return "(hidden)" if key in SECRET_KEYS else repr(text)

    def _last(self, key: str) -> RawValue | None:
        values = self._values.get(key)
        return values[-1] if values else None

    def string(self, key: str, default: str = "") -> str:
        value = self._last(key)
        if value is None:
            return default
        if value.text is None:
            raise ConfigError(f"{self._where(key, value)}: missing value")
        return value.text

    def strings(self, key: str) -> tuple[str, ...]:
        """A multi-valued key: each repetition appends, a blank or empty value resets."""
        out: list[str] = []
        for value in self._values.get(key, []):
            if not value.text:
                out.clear()
            else:
                out.append(value.text)
        return tuple(out)

    def boolean(self, key: str, default: bool) -> bool:
        value = self._last(key)
        if value is None:
            return default
        if value.text is None:
            return True
        word = value.text.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        shown = self._shown(key, value.text)
        raise ConfigError(f"{self._where(key, value)}: {shown} is not a boolean (true/false)")

    def integer(self, key: str, default: int) -> int:
        value = self._last(key)
        if value is None:
            return default
        try:
            return int((value.text or "").strip(), 10)
        except ValueError:
            shown = self._shown(key, value.text)
            raise ConfigError(f"{self._where(key, value)}: {shown} is not an integer") from None

    def duration(self, key: str, default: float) -> float:
        value = self._last(key)
        if value is None:
            return default
        try:
            return parse_duration(value.text or "")
        except ValueError as exc:
            raise ConfigError(f"{self._where(key, value)}: {exc}") from None

    def error(self, key: str, problem: str) -> ConfigError:
        """A ConfigError about `key` for checks made by the caller."""
        value = self._last(key) or RawValue(text=None, line=0)
        return ConfigError(f"{self._where(key, value)}: {problem}")
