"""The report renderer: pytest-benchmark JSON written by xfbench -> Markdown, HTML, CSV
and plots. `render_folder(folder)` is what the runner calls at the end of a sweep;
`xfbench report ...` (report.cli) is the command line."""

from __future__ import annotations

import datetime
from pathlib import Path

FORMATS = ("md", "html", "csv")


def render(
    results: list[str | Path],
    out: str | Path,
    formats=FORMATS,
    *,
    with_paper: bool = False,
    base: str | None = None,
    prices: str | Path | None = None,
    problems: list[str] | None = None,
) -> list[Path]:
    """Read RESULTS (runner folders or pytest-benchmark JSON files), write the report files
    into out, and return their paths (report.md / .html / .csv first, then
    each suite's own CSV files (such as report-scaling.csv) when there are such results,
    then the plots).

    Raises report.load.LoadError (unusable input), report.procurement.PricesError and
    ValueError (a base that names no machine); each message is one line. What was
    left out (a file that could not be read, a plot not drawn) is listed in the report
    and appended to problems when it is given."""
    from xfbench.report import model, procurement, render_csv, render_html, render_md, score
    from xfbench.report.files import write_text
    from xfbench.report.load import load_many

    runs = [run for p in results for run in load_many(p)]
    price_table = procurement.load_prices(prices) if prices else None
    rep = model.build(runs, with_paper=with_paper, base=base, prices=price_table)
    rep.scores = score.machine_scores(rep)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    drawn = _plots(rep, out / "plots") if {"md", "html"} & set(formats) else {}
    written = []
    if "md" in formats:
        written.append(write_text(out / "report.md", render_md.render(rep, drawn, out, generated)))
    if "html" in formats:
        written.append(write_text(out / "report.html", render_html.render(rep, drawn, generated)))
    if "csv" in formats:
        written.append(render_csv.write(rep, out / "report.csv"))
        written += render_csv.write_suites(rep, out)
    if problems is not None:
        problems += rep.problems
    return written + [p for kind in drawn.values() for _, p in kind]


def _plots(rep, folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Every plot the report shows: each suite's own (by its name: Table 7's first) and the
    roofline's; one that could not be drawn is said in rep.problems."""
    from xfbench.report import plots, roofline, suites

    plots.clear(folder)
    drawn: dict[str, list[tuple[str, Path]]] = {}
    for suite in suites.declared():  # each suite's own plots, shown by its sections
        draw = suite.hooks.plots
        found = draw and plots.safely(draw, rep, folder, problems=rep.problems, what=suite.name)
        drawn[suite.name] = found or []
    found = plots.safely(roofline.plots, rep, folder, problems=rep.problems, what="roofline")
    drawn.update(found or {"roofline": []})
    return drawn


def render_folder(folder: str | Path, formats=FORMATS) -> list[Path]:
    """Render a runner folder's report into the folder itself (report.md, report.html,
    report.csv, plots/) and return the paths written."""
    return render([folder], folder, formats)
