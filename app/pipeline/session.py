"""The SparkSession of a pipeline job, configured from Sundial's settings.

Local defaults suit a small machine: the driver binds 127.0.0.1, the UI is off unless asked for,
shuffles use few partitions, and every timestamp is read and written in UTC. On a cluster the
same settings apply; ``spark-submit`` flags given on its command line win over them because a
session that already exists is reused (docs/pipeline.md).

Python workers run ``spark.pyspark.python`` (from ``SUNDIAL_SPARK_CONF`` or ``spark-submit``),
else ``PYSPARK_PYTHON``, else the driver's own interpreter. When the master is not local, the
session also ships Sundial's code to the executors (:mod:`app.pipeline.shipping`), so a node
needs Python and a few third-party packages, not Sundial.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from app.config import Settings
from app.pipeline.shipping import package_zip

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("sundial.pipeline.session")

PYTHON = "spark.pyspark.python"


def spark_conf(settings: Settings) -> dict[str, str]:
    """The Spark settings of a job, from ``settings`` (``spark_conf`` last, so it wins)."""
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": "sundial-pipeline",
        "spark.driver.memory": settings.spark_driver_memory,
        "spark.sql.shuffle.partitions": str(settings.spark_shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": str(settings.spark_ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        # Python workers run the interpreter that runs Sundial (or the one PYSPARK_PYTHON names).
        PYTHON: os.environ.get("PYSPARK_PYTHON", sys.executable),
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    if settings.spark_master.startswith("local"):
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    if settings.spark_local_dir is not None:
        conf["spark.local.dir"] = str(settings.spark_local_dir)
    conf.update(settings.spark_conf)
    return conf


def is_local(master: str) -> bool:
    """Whether ``master`` runs executors on this machine, with the driver's interpreter
    (``local``, ``local[N]``, ``local-cluster[...]``)."""
    return master.startswith("local")


def submitted_by_spark_submit() -> bool:
    """Whether ``spark-submit`` launched this process (its JVM is already running)."""
    # spark-submit's PythonRunner hands the Python driver its gateway through this variable.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def start_spark(settings: Settings) -> SparkSession:
    """The job's SparkSession, from ``settings``.

    Under ``spark-submit``, settings it was given (``--master``, ``--conf``) win: Sundial's
    only fill in the ones it left unset.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    wanted = spark_conf(settings)
    if is_local(settings.spark_master):
        # Read by the JVM at launch: keeps Spark's own address lookup on the loopback too.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if submitted_by_spark_submit():
        given = SparkConf()  # loads what spark-submit set
        wanted = {key: value for key, value in wanted.items() if not given.contains(key)}
    if PYTHON in wanted:
        # PySpark starts its Python workers with PYSPARK_PYTHON, read when the context starts;
        # spark.pyspark.python itself is only read by spark-submit (which then sets the variable).
        os.environ["PYSPARK_PYTHON"] = wanted[PYTHON]
    builder = SparkSession.builder
    for key, value in wanted.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    ship_code(spark)
    return spark


def ship_code(spark: SparkSession) -> None:
    """On a cluster, add Sundial's code to the session, for executors that do not have it."""
    context = spark.sparkContext
    if is_local(context.master or "local"):
        return
    shipped = package_zip()
    context.addPyFile(str(shipped))
    log.info("shipping %s to the executors of %s", shipped.name, context.master)
