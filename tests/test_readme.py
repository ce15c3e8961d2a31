"""README.md's two commands are the ones CI and users run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_two_commands():
    assert len(readme_commands()) == 2


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_readme_is_short_and_its_links_and_the_docs_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 100  # the two commands, what a number means, an index
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    missing = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).is_file():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_to_a_heading_name_one_that_exists():
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)?#([^)\s]+)\)", page.read_text()):
            linked = page.parent / target if target else page
            if not linked.is_file():
                continue  # a missing file is the test above's to report
            headings = re.findall(r"^#+ (.*)$", linked.read_text(), re.M)
            if anchor not in {heading_anchor(h) for h in headings}:
                broken.append(f"{page.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, broken


def test_every_row_of_the_reliability_table_names_tests_that_exist():
    """docs/reliability.md promises a test per bad input or fault: each one it names is a
    test function in that file (a renamed or removed test fails here)."""
    import re

    text = (ROOT / "docs" / "reliability.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "::" in line]
    assert len(rows) >= 15
    for row in rows:
        for file, name in re.findall(r"`(test_\w+\.py)::(\w+)`", row):
            source = (ROOT / "tests" / file).read_text()
            assert re.search(rf"^def {name}\(", source, re.M), f"{file}::{name} (from: {row})"
