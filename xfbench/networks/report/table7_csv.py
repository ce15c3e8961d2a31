"""report.csv, Table 7's cells for spreadsheets: one row per cell (timed or failed), every
number at full precision, plus the paper's cells when --paper is given (report/render_csv.py
writes it; the network suite's Hooks.table7, `csv`)."""

from __future__ import annotations

from xfbench import records
from xfbench.networks.fields import NETWORK_CELL
from xfbench.networks.report import paper
from xfbench.networks.report.cells import cells_of, machine_cells
from xfbench.networks.report.model import table7_content
from xfbench.report.api import Report

COLUMNS = (
    "source",
    "machine",
    "host",
    "run",
    "task",
    "network",
    "batch_size",
    "scale",
    "framework",
    "mode",
    "precision",
    "data",
    "device",
    "device_name",
    "threads",
    "status",
    "seconds_per_batch",
    "ci_low_s",
    "ci_high_s",
    "ci_level",
    "ci_half_width",
    "ci_target_met",
    "samples_per_s",
    "achieved_tflops",
    "gemm_peak_tflops",
    "peak_share",
    "speedup_vs_1t",
    "parallel_efficiency",
    "threads_used",
    "other_cpu_share",
    "steal_share",
    "contended",
    "thread_shortfall",
    "compile_s",
    "peak_host_rss_bytes",
    "peak_device_bytes",
    "rounds",
    "best_in_column",
    "verified",
    "max_rel_err",
    "data_set",
    "data_wait_s",
    "data_wait_share",
    "samples_per_s_resident",
    "input_bound",
    "loader_workers",
    "epoch_s",
    "copies",
    "copy_cpus",
    "copy_medians_s",
    "aggregate_samples_per_s",
    "copies_spread",
    "copies_overlap",
    "energy_method",
    "energy_j",
    "joules_per_sample",
    "samples_per_kj",
    "samples_per_s_per_usd",
    "samples_per_s_per_watt_typed",
    "usd_per_million_samples",
    "kwh_per_million_samples_typed",
    "reason",
    "file",
)


# Columns that are fields of a network record (networks/fields.py) are copied from it;
# rows() then sets the ones the report computes or reads from the loaded result.
RECORD_COLUMNS = tuple(c for c in COLUMNS if c in records.keys(NETWORK_CELL))


def _cell(r) -> dict:
    return {
        "task": r.task,
        "network": r.network,
        "batch_size": r.batch_size,
        "scale": r.scale,
        "framework": r.framework,
        "mode": r.mode,
        "precision": r.precision,
        "data": r.data,
        "device": r.device,
        "device_name": r.device_name,
        "threads": r.threads,
        "status": r.status,
        "reason": r.reason,
        "file": r.source,
    }


def rows(report: Report) -> list[dict]:
    """report.csv: every cell (measured, failed, or one of several copies), in the order of
    the report's blocks, then the paper's cells where the report sets them beside ours."""
    out = [_detail_row(d) for d in table7_content(report).details]
    for m in report.machines:
        cells = machine_cells(m)
        for f in cells.failures:
            out.append({**_where(m, f), **_cell(f)})
        for r in cells.copies:  # several copies at once: a row each, beside the others
            own = {k: r.info.get(k) for k in RECORD_COLUMNS} if r.ok else {}
            out.append(
                {
                    **own,
                    **_where(m, r),
                    **_cell(r),
                    "seconds_per_batch": r.median,
                    "copies": r.copies,
                }
            )
    order = {b.key: i for i, b in enumerate(table7_content(report).blocks)}

    def key(row):
        block = (row["task"], row["network"], row["batch_size"], row["scale"])
        return (order.get(block, 0), row["machine"], row["framework"], row["mode"])  + (
            row["precision"], row["data"], row["device"] != "cpu", row["threads"],
            row["device_name"],
        )  # fmt: skip

    out.sort(key=key)
    return out + (_paper_rows(report) if report.with_paper else [])


def _where(m, r) -> dict:
    """Where a result comes from: xfbench, its machine, host and run."""
    run = next((run.name for run in m.runs if r in cells_of(run)), "")
    return {"source": "xfbench", "machine": m.label, "host": m.host, "run": run}


def _detail_row(d) -> dict:
    r, info = d.result, d.result.info
    return {
        **{k: info.get(k) for k in RECORD_COLUMNS},
        **_where(d.machine, r),
        **_cell(r),
        "seconds_per_batch": r.median,
        "samples_per_s": d.samples_per_s,
        "achieved_tflops": d.tflops,
        "gemm_peak_tflops": d.peak_tflops,  # its name since the first reports
        "peak_share": d.peak_share,
        "speedup_vs_1t": d.speedup,
        "parallel_efficiency": d.efficiency,
        "best_in_column": d.best_in_column,
        "verified": None if d.verified is None else d.verified["verified"],
        "max_rel_err": d.verified["max_rel_err"] if d.verified else None,
        **d.money,
    }


def _paper_rows(report: Report) -> list[dict]:
    """Shi et al.'s seconds per mini-batch of each block the paper has, a row a tool and
    column."""
    t, out = paper.table(), []
    for block in (b for b in table7_content(report).blocks if b.paper):
        for tool, values in block.paper.values:
            for column in (c for c in t.columns if c in values):
                where, _, threads = column.partition("_t")
                out.append(
                    {
                        "source": "paper",
                        "machine": f"Shi et al. 2016 {where}",
                        "task": block.key[0],  # the paper measured this task
                        "network": block.paper.row,
                        "batch_size": block.paper.batch,
                        "framework": tool,
                        "device": "cpu" if threads else "gpu",
                        "device_name": "cpu" if threads else paper.column_label(column),
                        "threads": int(threads) if threads else None,
                        "status": "ok",
                        "seconds_per_batch": values[column],
                    }
                )
    return out


def table(report: Report) -> tuple[tuple[str, ...], list[dict]]:
    """report.csv's columns and rows."""
    return COLUMNS, rows(report)
