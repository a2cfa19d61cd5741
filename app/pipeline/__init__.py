"""Sundial's data pipeline on Spark (the optional ``pipeline`` extra; docs/pipeline.md).

Three jobs, each a ``sundial pipeline`` command:

- :mod:`app.pipeline.export` copies finished history out of PostgreSQL (every pool's, each with
  its own watermark) into a Parquet lake partitioned by namespace / queue / day, incrementally
  (``COPY`` streamed through pyarrow), and :mod:`app.pipeline.prune` drops history partitions
  once they are exported and past retention;
- :mod:`app.pipeline.report` computes the hourly queue report with Spark over the lake
  (:mod:`app.pipeline.transforms` holds its pure DataFrame functions) and writes it to the lake
  and to ``report_hourly``;
- :mod:`app.pipeline.enqueue` reads a dataset with Spark, validates every row with the core's
  rules (:mod:`app.pipeline.rows`) and enqueues it with set-based inserts over a few
  connections (:mod:`app.pipeline.loading`), into the database of the namespace's pool.

:mod:`app.pipeline.session` starts the SparkSession and, on a cluster, ships Sundial's code to
the executors (:mod:`app.pipeline.shipping`); :mod:`app.pipeline.progress` draws the commands'
progress on a terminal. :mod:`app.pipeline.submit` runs the same commands under
``spark-submit``. The core never imports this package; the CLI imports it lazily.
"""
