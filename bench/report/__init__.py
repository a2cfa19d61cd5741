"""The suite's report: the summary table's rows from the results (bench/report/rows.py) and the
printed report, also written as ``report-<mode>.md`` (bench/report/render.py)."""
