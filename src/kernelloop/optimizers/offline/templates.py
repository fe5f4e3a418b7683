"""The template library: `exemplars/templates/*.cu.in`, loaded and instantiated.

A template is CUDA text with `{{NAME}}` placeholders and a header of `// key: value` lines
(name, family, technique, summary, interface, meta-parameters, placeholders). Instantiation
is plain substitution that fails loudly: a placeholder without a value, a value without a
placeholder, or a header that does not list exactly the placeholders the text uses is an
error, never a silently broken kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError
from ...package_files import package_path

DEFAULT_TEMPLATES_DIR = package_path("exemplars", "templates")
TEMPLATE_SUFFIX = ".cu.in"
_PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
_HEADER_KEY = re.compile(r"^//\s*(kernelloop template|family|technique|interface|placeholders):\s*(.*?)\s*$")


class TemplateError(InputError):
    """A template file is malformed or was instantiated with the wrong values."""


@dataclass(frozen=True)
class Template:
    name: str
    family: str
    technique: str
    interface: str
    placeholders: tuple[str, ...]
    text: str
    path: Path

    def render(self, values: dict[str, str]) -> str:
        used = set(self.placeholders)
        missing = sorted(used - set(values))
        unused = sorted(set(values) - used)
        if missing or unused:
            parts = ([f"no value for {', '.join(missing)}"] if missing else []) + \
                    ([f"no placeholder for {', '.join(unused)}"] if unused else [])
            raise TemplateError(f"template {self.name}: {'; '.join(parts)}")
        for key, value in values.items():
            if not value.isascii() or "{{" in value or "}}" in value:
                raise TemplateError(f"template {self.name}: value of {key} is not plain ASCII code")
        out = _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.text)
        if "{{" in out or "}}" in out:
            raise TemplateError(f"template {self.name}: a malformed placeholder remains after substitution")
        return out


def parse_template(path: Path) -> Template:
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"{path}: cannot read the template as ASCII text ({exc})") from exc
    header: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        m = _HEADER_KEY.match(line)
        if m:
            header[m.group(1)] = m.group(2)
    required = ("kernelloop template", "family", "technique", "interface", "placeholders")
    absent = [k for k in required if not header.get(k)]
    if absent:
        raise TemplateError(f"{path}: header lacks {', '.join(absent)}")
    declared = tuple(header["placeholders"].split())
    body_uses = {m.group(1) for m in _PLACEHOLDER.finditer(text)}
    if set(declared) != body_uses:
        raise TemplateError(f"{path}: header declares placeholders {sorted(declared)} but the text uses "
                            f"{sorted(body_uses)}")
    if header["kernelloop template"] + TEMPLATE_SUFFIX != path.name:
        raise TemplateError(f"{path}: header names the template {header['kernelloop template']!r}")
    return Template(name=header["kernelloop template"], family=header["family"], technique=header["technique"],
                    interface=header["interface"], placeholders=declared, text=text, path=path)


def load_templates(directory: Path | None = None) -> dict[str, Template]:
    folder = directory or DEFAULT_TEMPLATES_DIR
    if not folder.is_dir():
        raise TemplateError(f"{folder}: template directory not found")
    found = {t.name: t for t in (parse_template(p) for p in sorted(folder.glob(f"*{TEMPLATE_SUFFIX}")))}
    if not found:
        raise TemplateError(f"{folder}: no *{TEMPLATE_SUFFIX} templates")
    return found
