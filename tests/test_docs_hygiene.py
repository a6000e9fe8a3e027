"""The project speaks to its users, and its documents hold together (fast: no server, no worker, no cluster).

- the README is a 5-minute read (at most 120 lines, no giant table cells);
- no notes of work periods (an ordinal and the word "session") and no internal issue numbers or citations of the
  internal spec's sections anywhere in the project (``SCANNED``: code, tests, docs, data notes, results);
- every results JSON of ``benchmarks/results/`` says how it was made (``provenance``);
- the generated CLI and API reference pages are current (``python docs/generate.py`` rewrites them);
- every relative link of the README and ``docs/`` resolves to a file.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: What the text checks read: the whole project, files or folders relative to its root.
SCANNED = ["README.md", "Makefile", "Dockerfile", "pyproject.toml", ".ci", "docs", "benchmarks", "notebooks", "examples",
           "data", "tests", "spottune", "revpred", "earlycurve", "provisioner", "spotmarket"]
#: File suffixes the text checks read inside the scanned folders.
SUFFIXES = {".md", ".py", ".json", ".ipynb", ".yaml", ".yml", ".txt", ".log", ".cfg", ".toml", ""}
#: Links allowed to point at a page that does not exist (none today).
PENDING_LINKS: set[str] = set()

#: A note of a work period: "session" after an ordinal or "this", "last", ...; "session of" or "session," and a date.
#: The examples below are split into adjacent literals (the same strings) so that a scan of tests/ passes over them.
WORK_PERIOD = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(?:st|nd|rd|th)|"
    r"this|that|last|next|previous|earlier|later|same|one|each)\s+session\b"
    r"|\bsessions?\s+of\s+\d{4}|\bsession,\s+\d{4}-\d\d|\badhoc_\w*session", re.IGNORECASE)
#: An internal issue number ("issue", "#" optional, and a number) or a section of the internal spec (its file name,
#: "spec" and a section or an open point, the style guide's sections).
INTERNAL_REFERENCE = re.compile(
    r"\bissues?\s*#?\d+|SPOTTUNE_" r"SPEC|\b(?:spec|SpotTune)(?:'s)?\s+(?:§\s*\d|[DI]\d+\b)|\bSTYLE\s+§", re.IGNORECASE)


def _scanned_files() -> list[Path]:
    out = []
    for entry in SCANNED:
        path = ROOT / entry
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += [p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in SUFFIXES
                    and "__pycache__" not in p.parts and not p.name.startswith(".")]
    return out


def _hits(pattern: re.Pattern) -> list[str]:
    hits = []
    for path in _scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for m in pattern.finditer(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    return hits


def test_readme_is_a_five_minute_read():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines (at most 120)"
    cells = [c.strip() for line in lines if line.lstrip().startswith("|") for c in line.split("|")]
    assert all(len(c) <= 200 for c in cells), max(cells, key=len)


def test_no_work_period_notes():
    assert not _hits(WORK_PERIOD), "\n".join(_hits(WORK_PERIOD))


def test_no_internal_issue_numbers_or_spec_sections():
    assert not _hits(INTERNAL_REFERENCE), "\n".join(_hits(INTERNAL_REFERENCE))


def test_the_patterns_catch_what_they_are_for():
    for text in ("ninth" " session", "this" " session", "(session" " of 2026-11-25)", "eighth" " session," " 2026-11-27"):
        assert WORK_PERIOD.search(text), text
    for text in ("the boto3 session", "_session.py", "a session token"):
        assert not WORK_PERIOD.search(text), text
    for text in ("issue" " 12", "Issue" " 13's target", "issues" " 12-13", "issue" " #7", "SPOTTUNE_" "SPEC.md §4",
                 "spec" " §1.8", "(spec" " D10)", "STYLE" " §1c", "SpotTune" " §1.4"):
        assert INTERNAL_REFERENCE.search(text), text
    for text in ("the paper's §IV", "Eq 2", "spec's defaults < the file", "an issue with the data"):
        assert not INTERNAL_REFERENCE.search(text), text


RESULTS = sorted((ROOT / "benchmarks" / "results").rglob("*.json"))


@pytest.mark.parametrize("path", RESULTS, ids=[p.relative_to(ROOT / "benchmarks" / "results").as_posix() for p in RESULTS])
def test_results_json_has_provenance(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("provenance"), dict), f"{path.name}: no provenance block"
    prov = data["provenance"]
    missing = {"argv", "commit", "dirty", "packages", "date"} - set(prov)
    assert not missing, f"{path.name}: provenance lacks {sorted(missing)}"
    assert isinstance(prov["argv"], list) and prov["argv"], path.name
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"] or ""), f"{path.name}: commit {prov['commit']!r}"
    assert isinstance(prov["packages"], dict) and prov["packages"], path.name
    assert re.match(r"\d{4}-\d\d-\d\dT", prov["date"]), f"{path.name}: date {prov['date']!r}"


def test_provenance_writer_records_how_a_file_was_made(tmp_path):
    spec = importlib.util.spec_from_file_location("_bench_common", ROOT / "benchmarks" / "_common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    out = tmp_path / "r.json"
    common.write_json(out, {"x": 1.5, "provenance": "stale"}, argv=["benchmarks/bench_x.py", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["x"] == 1.5 and data["provenance"]["argv"][1:] == ["benchmarks/bench_x.py", "--out", str(out)]
    assert {"argv", "commit", "dirty", "packages", "date"} <= set(data["provenance"])
    assert data["provenance"]["packages"]["numpy"]


def _generator():
    spec = importlib.util.spec_from_file_location("_docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["docs/guide/cli.md", "docs/guide/api.md"])
def test_generated_reference_is_current(page):
    gen = _generator()
    make = {p.relative_to(ROOT).as_posix(): f for p, f in gen.PAGES.items()}[page]
    expected = make()
    expected = expected if expected.endswith("\n") else expected + "\n"
    assert (ROOT / page).read_text(encoding="utf-8") == expected, f"{page} is stale: run python docs/generate.py"


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")


def test_relative_links_resolve():
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # links in code blocks are code
        for m in LINK.finditer(text):
            target = next(g for g in m.groups() if g)
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL (http:, mailto:) or an anchor of the same page
            path = (page.parent / target.split("#")[0]).resolve()
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
            if not path.exists() and rel not in PENDING_LINKS:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)
