"""The docs cannot drift from the code: what they cite exists, and what can be generated is.

- docs/configuration.md is the output of ``imbucket.app.settings_doc``;
- every row of the Guarantees table (docs/development.md) cites tests that exist;
- every relative link in README.md and docs/*.md reaches a file (and a heading, for anchors);
- every repository path cited in backticks (``src/…``, ``tests/…``, ``docs/…``) exists;
- neither the docs nor the shipped code cite commits, issues or files outside the repository.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from functools import cache
from pathlib import Path

import pytest

from imbucket.app.settings import Settings
from imbucket.app.settings_doc import REGENERATE, render

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED_ROOTS = ("src/", "tests/", "docs/", "examples/", "tools/", ".ci/")

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`]+)`")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def test_the_configuration_reference_is_generated_from_the_settings_model() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), f"docs/configuration.md is stale: run `{REGENERATE}`"


def test_every_setting_has_a_description() -> None:
    undescribed = [
        f"{section}.{key}"
        for section, field in Settings.model_fields.items()
        for key, info in getattr(field.annotation, "model_fields", {}).items()
        if not info.description
    ]
    assert not undescribed, f"add Field(description=...) to: {undescribed}, then `{REGENERATE}`"


def _guarantee_rows() -> list[tuple[str, str]]:
    """(guarantee, test cell) for every row of docs/development.md's Guarantees table."""
    text = (ROOT / "docs" / "development.md").read_text() + "\n## "
    section = text.split("\n## Guarantees\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells[-1] != "test":
            rows.append((cells[0], cells[-1]))
    return rows


@cache
def _test_names(path: Path) -> frozenset[str]:
    """The names of the test functions (module level and in classes) a test file defines."""
    tree = ast.parse(path.read_text())
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    )


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))


def _cited_tests(cell: str) -> tuple[int, list[str]]:
    """How many tests a Guarantees cell cites, and what of it does not resolve.

    A cell cites ``tests/path.py``, ``tests/path.py::test_name``, ``::test_name`` (in the
    file cited last), ``…part_of_a_name…`` (at least one test of that file matches), a
    directory ``tests/dir/``, or ``make target``.
    """
    found, faults = 0, []
    last: Path | None = None
    for span in _CODE_SPAN.findall(cell):
        if span.startswith("make "):
            ok = span.split()[1] in _make_targets()
        elif span.startswith("tests/"):
            path_text, _, name = span.partition("::")
            last = ROOT / path_text
            ok = last.exists() and (not name or name in _test_names(last))
        elif span.startswith("::") or "…" in span:
            pattern = span.removeprefix("::").replace("…", "*")
            ok = (
                last is not None
                and last.is_file()
                and bool(fnmatch.filter(_test_names(last), pattern))
            )
        else:
            continue
        found += ok
        if not ok:
            faults.append(span)
    return found, faults


def test_every_guarantee_cites_tests_that_exist() -> None:
    rows = _guarantee_rows()
    assert len(rows) > 20, "the Guarantees table of docs/development.md was not found"
    faults = {}
    for guarantee, cell in rows:
        found, unresolved = _cited_tests(cell)
        if unresolved or not found:
            faults[guarantee[:60]] = unresolved or "cites no test"
    assert not faults, f"Guarantees rows citing tests that do not exist: {faults}"


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    text = _FENCE.sub("", path.read_text())
    return frozenset(_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    text = _FENCE.sub("", page.read_text())
    broken = []
    for match in _LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path_text, _, anchor = target.partition("#")
        path = (page.parent / path_text).resolve() if path_text else page
        missing = not path.exists() or not path.is_relative_to(ROOT)
        if missing or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_repository_path_cited_exists(page: Path) -> None:
    missing = []
    for span in _CODE_SPAN.findall(page.read_text()):
        words = span.split("::")[0].split()
        path_text = words[0] if words else ""
        if not path_text.startswith(CITED_ROOTS) or re.search(r"[<…{$]", path_text):
            continue
        path_text = path_text.rstrip(".,;:)")
        if not (list(ROOT.glob(path_text)) if "*" in path_text else (ROOT / path_text).exists()):
            missing.append(path_text)
    assert not missing, f"{page.name} cites paths that do not exist: {missing}"


_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_HISTORY = re.compile(r"\bissue \d+|issue-\d+|\bresearch/|\.\./shared/|DESIGN\.md", re.I)
SHIPPED = [
    *sorted((ROOT / "src").rglob("*.py")),
    *sorted((ROOT / "tests" / "contract").glob("*.py")),
]


@pytest.mark.parametrize("group", ["docs", "code"])
def test_docs_and_shipped_code_cite_no_commits_issues_or_outside_files(group: str) -> None:
    """Docs and shipped code say what is and why, not which commit or issue brought it."""
    files = PAGES if group == "docs" else SHIPPED
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in [*_HASH.finditer(line), *_HISTORY.finditer(line)]
    ]
    assert not found, "history belongs in CHANGELOG.md: " + "; ".join(found)
