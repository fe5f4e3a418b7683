"""Turning files into chunks, and text into BM25 tokens.

Everything here is pure (no database, no model): a file's bytes go in, a `Parsed`
document with its chunks comes out. Markdown (and HTML, converted to Markdown-ish text)
is chunked by heading, long sections are cut further at paragraph boundaries so a chunk
stays within what the embedding model reads (256 word pieces).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHUNK_WORDS = 120  # upper bound on a chunk body's words: with the title and tags prepended it stays
# within the 256 word pieces MiniLM reads
OVERLAP_WORDS = 20  # overlap when one paragraph alone is longer than CHUNK_WORDS
EXEMPLAR_LINES = 60  # lines per exemplar chunk
NAVIGATION_HEADINGS = ("see also", "related", "related notes")  # note sections not indexed

# -- tokenizing --------------------------------------------------------------------------

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers him his how i if in into is it its itself just me more most my no nor not
now of off on once only or other our ours out over own same she should so some such than that the
their theirs them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours also may might must shall
get gets got use uses used using make makes made one two via per eg ie etc vs
""".split())

_RAW_TOKEN = re.compile(r"[^\W\d]\w*|\d+[^\W\d]\w*")  # words and identifiers (Unicode: µs); 4x, 2d
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def stem(word: str) -> str:
    """A small, conservative suffix stemmer: coalesced/coalescing/coalesce -> coalesc."""
    w = word
    if len(w) <= 3:
        return w
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and (not w.endswith(("ss", "us", "is")) or w in ("gpus", "cpus")) and len(w) > 3:
        w = w[:-1]
    for suffix, repl in (("isation", "iz"), ("ization", "iz"), ("ational", "ate"), ("ction", "c"),
                         ("ingly", ""), ("edly", ""), ("ing", ""), ("ed", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            base = w[: len(w) - len(suffix)] + repl
            if suffix in ("ing", "ed", "ingly", "edly"):
                if not re.search(r"[aeiouy]", base):
                    break
                if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":
                    base = base[:-1]  # mapped -> map, padded -> pad
            w = base
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if w.endswith("y") and len(w) > 4:
        w = w[:-1] + "i"  # occupancy / occupancies
    return w


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed tokens; identifiers also split (threadIdx -> thread, idx).

    Pure numbers are dropped (a summary's percentages would match any number in a note);
    alphanumerics such as float4, fp16, sm_90 and l1 are kept.
    """
    out: list[str] = []
    for raw in _RAW_TOKEN.findall(text):
        parts = [p for p in re.split(r"_+", raw) if p]
        pieces: list[str] = []
        kept: list[str] = []
        for p in parts:
            if len(p) > 2 and re.fullmatch(r"[A-Z][A-Z0-9]*s", p):
                p = p[:-1]  # an acronym's plural: GPUs, SMs
            kept.append(p)
            sub = [p] if p.islower() or p.isupper() else _CAMEL.findall(p)
            pieces.extend(s.lower() for s in sub)
        whole = "".join(kept).lower()
        candidates = [whole] if len(pieces) <= 1 else [whole, *pieces]
        for tok in candidates:
            if len(tok) < 2 or tok.isdigit() or tok in STOPWORDS:
                continue
            out.append(stem(tok))
    return out


# -- documents ---------------------------------------------------------------------------

@dataclass
class Chunk:
    heading: str
    text: str  # what a hit shows (the section with its heading line)
    extra: str = ""  # indexed but not shown (title, tags, headings repeated for weight)

    @property
    def index_text(self) -> str:
        return f"{self.extra}\n{self.text}" if self.extra else self.text


@dataclass
class Parsed:
    title: str
    chunks: list[Chunk]
    doc_id: str | None = None
    tags: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- front matter (a YAML subset: scalars, [inline, lists], and "- item" block lists) ----------

def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _inline_list(value: str) -> list[str]:
    inner = value.strip()[1:-1]
    return [_scalar(v) for v in inner.split(",") if _scalar(v)]


def parse_front_matter(text: str) -> tuple[dict[str, str | list[str]], str]:
    """`---` front matter at the top of a Markdown file -> (fields, body)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, text
    meta: dict[str, str | list[str]] = {}
    key: str | None = None
    for line in lines[1:end]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and key is not None:
            current = meta.get(key)
            if not isinstance(current, list):
                current = []
            current.append(_scalar(item.group(1)))
            meta[key] = current
            continue
        kv = re.match(r"^([A-Za-z0-9_-]+)\s*:\s*(.*)$", line)
        if not kv:
            continue
        key, value = kv.group(1).lower(), kv.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = _inline_list(value)
        elif value in ("", "|", ">"):
            meta[key] = []
        else:
            meta[key] = _scalar(value)
    return meta, "\n".join(lines[end + 1:])


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if v]
    return [v.strip() for v in value.split(",") if v.strip()]


# -- chunking ----------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def split_sections(body: str, levels: int) -> list[tuple[str, str]]:
    """(heading, text) pairs, cut at headings of level <= `levels`, never inside ``` fences.

    The text keeps its heading line. Text before the first heading gets heading ''.
    """
    sections: list[tuple[str, list[str]]] = [("", [])]
    fence = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else _HEADING.match(line)
        if m and len(m.group(1)) <= levels:
            sections.append((m.group(2).strip(), [line]))
        else:
            sections[-1][1].append(line)
    return [(h, "\n".join(lines).strip()) for h, lines in sections if "\n".join(lines).strip()]


def _paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks; a fenced code block stays one block."""
    blocks: list[str] = []
    current: list[str] = []
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not fence and not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _split_words(block: str, limit: int, overlap: int) -> list[str]:
    words = block.split()
    if len(words) <= limit:
        return [block]
    step = max(1, limit - overlap)
    return [" ".join(words[i:i + limit]) for i in range(0, max(1, len(words) - overlap), step)]


def pack(text: str, limit: int | None = None) -> list[str]:
    """Cut `text` into pieces of at most ~`limit` (CHUNK_WORDS) words at paragraph boundaries."""
    limit = CHUNK_WORDS if limit is None else limit
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for block in _paragraphs(text):
        n = len(block.split())
        if n > limit:
            if current:
                pieces.append("\n\n".join(current))
                current, count = [], 0
            pieces.extend(_split_words(block, limit, OVERLAP_WORDS))
            continue
        if count + n > limit and current:
            pieces.append("\n\n".join(current))
            current, count = [], 0
        current.append(block)
        count += n
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _first_heading(body: str) -> str | None:
    for heading, _ in split_sections(body, 1):
        if heading:
            return heading
    return None


def _strip_title_line(text: str, title: str) -> str:
    lines = text.splitlines()
    if lines and _HEADING.match(lines[0]) and _HEADING.match(lines[0]).group(2).strip() == title:  # type: ignore[union-attr]
        return "\n".join(lines[1:]).strip()
    return text


def markdown_document(text: str, *, fallback_title: str, levels: int = 3, note: bool = False) -> Parsed:
    """Markdown -> chunks by section. For a note (`note=True`): cut at `##`, and the
    front matter's title, tags and id are indexed again on every chunk (extra weight)."""
    meta, body = parse_front_matter(text)
    title = str(meta.get("title") or _first_heading(body) or fallback_title).strip()
    tags = _as_list(meta.get("tags"))
    rules = _as_list(meta.get("rules"))
    doc_id = str(meta["id"]).strip() if isinstance(meta.get("id"), str) and str(meta["id"]).strip() else None
    extra_lines = [title, title]
    if tags:
        extra_lines.append(", ".join(tags))
        extra_lines.append(", ".join(tags))
    if note and doc_id:
        extra_lines.append(doc_id.replace("-", " "))
    chunks: list[Chunk] = []
    for heading, section in split_sections(body, 2 if note else levels):
        if note and heading.strip().lower() in NAVIGATION_HEADINGS:
            continue  # a list of related note ids: it would match their topics, not this note's
        if not heading or heading == title:
            section = _strip_title_line(section, title)
            heading = heading if heading and heading != title else "overview"
            if not section:
                continue
        pieces = pack(section)
        for i, piece in enumerate(pieces):
            shown = piece if i == 0 or not heading else f"{'## ' if note else ''}{heading} (cont.)\n\n{piece}"
            chunks.append(Chunk(heading=heading, text=shown, extra="\n".join([*extra_lines, heading])))
    if not chunks and body.strip():
        chunks.append(Chunk(heading="overview", text=body.strip(), extra="\n".join(extra_lines)))
    return Parsed(title=title, chunks=chunks, doc_id=doc_id, tags=tags, rules=rules)


def plain_document(text: str, *, title: str) -> Parsed:
    chunks = [Chunk(heading=title, text=piece, extra=f"{title}") for piece in pack(text)]
    return Parsed(title=title, chunks=chunks)


# -- HTML ----------------------------------------------------------------------------------

class _HtmlToText(HTMLParser):
    SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    BLOCK = {"p", "div", "section", "article", "li", "tr", "br", "pre", "blockquote", "table", "ul", "ol",
             "dd", "dt", "header", "footer", "main", "aside", "figure", "figcaption", "hr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title: list[str] = []
        self._skip = 0
        self._in_title = False
        self._heading: int | None = None
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self.SKIP:
            self._skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = int(tag[1])
            self.out.append("\n\n" + "#" * self._heading + " ")
        elif tag == "pre":
            self._pre += 1
            self.out.append("\n\n```\n")
        elif tag in self.BLOCK:
            self.out.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = None
            self.out.append("\n\n")
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.out.append("\n```\n\n")
        elif tag in self.BLOCK:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif self._skip:
            return
        elif self._pre:
            self.out.append(data)
        else:
            self.out.append(re.sub(r"\s+", " ", data))


def html_to_markdown(html: str) -> tuple[str | None, str]:
    parser = _HtmlToText()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    text = "\n".join(line.rstrip() for line in text.splitlines())
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    title = " ".join("".join(parser.title).split()) or None
    return title, text


def html_document(html: str, *, fallback_title: str) -> Parsed:
    title, text = html_to_markdown(html)
    parsed = markdown_document(text, fallback_title=title or fallback_title)
    if title:
        parsed.title = title
    return parsed


# -- CUDA exemplars --------------------------------------------------------------------------

def _leading_comment(source: str) -> str:
    m = re.match(r"\s*/\*(.*?)\*/", source, re.S)
    if m:
        return re.sub(r"^\s*\*\s?", "", m.group(1), flags=re.M).strip()
    lines = []
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("//"):
            lines.append(s.lstrip("/").strip())
        elif s and not lines:
            break
        elif not s and lines:
            break
        elif s:
            break
    return "\n".join(lines).strip()


def exemplar_document(source: str, *, name: str) -> Parsed:
    """A .cu file: title from the leading comment's first line (or the file name); chunks
    of EXEMPLAR_LINES lines; the comment and file name are indexed on every chunk."""
    comment = _leading_comment(source)
    stem = Path(name).stem
    title = (comment.splitlines()[0].strip() if comment else "") or stem.replace("_", " ")
    lines = source.splitlines()
    extra = "\n".join([title, stem.replace("_", " "), "exemplar kernel", comment])
    chunks = []
    for start in range(0, max(1, len(lines)), EXEMPLAR_LINES):
        part = "\n".join(lines[start:start + EXEMPLAR_LINES]).strip()
        if part:
            chunks.append(Chunk(heading=f"{name} lines {start + 1}-{min(len(lines), start + EXEMPLAR_LINES)}",
                                text=part, extra=extra))
    return Parsed(title=title, chunks=chunks)
