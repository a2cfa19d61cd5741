"""Entry point for ``spark-submit``: the ``sundial pipeline`` commands, on a cluster.

    spark-submit --master yarn --deploy-mode client \
        "$(python -c 'import app.pipeline.submit as m; print(m.__file__)')" \
        report --lake s3a://analytics/sundial-lake

Settings given to ``spark-submit`` (``--master``, ``--conf``) win over Sundial's ``SPARK_*``
settings (see :func:`app.pipeline.session.start_spark`).
"""

from __future__ import annotations

from app.pipeline.commands import pipeline

if __name__ == "__main__":
    pipeline(prog_name="sundial pipeline")
