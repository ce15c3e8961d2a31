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
    assert len(readme.splitlines()) <= 250
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    missing = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).is_file():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, missing
