"""A streaming consume-transform-produce job with injected faults, for the exactly-once test.

    python -m tests.spark.eos_job BOOTSTRAP CHECKPOINT GUARANTEE STATE_DIR

Copies topic ``eos-in`` to ``eos-out`` (value -> b"out-" + value) through the shoal source and sink,
``Trigger.AvailableNow``, at most 200 records per micro-batch. Each fault fires once over all runs
(a file in STATE_DIR records it):

- kill-mid:            batch 1, task 0, before it writes anything: SIGKILL the whole job (driver,
                       JVM and Python workers)
- kill-between-tasks:  batch 3, task 1, four seconds in, when task 0 has written and committed: SIGKILL
- worker-crash:        batch 5, task 0, first attempt: the Python worker exits (the task is retried)
- kill-between-batches: after batch 7 is reported complete: SIGKILL from the driver's query listener
"""

from __future__ import annotations

import os
import signal
import sys
import time


def fire_once(state_dir: str, name: str) -> bool:
    try:
        os.close(os.open(os.path.join(state_dir, name), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def main() -> None:
    bootstrap, checkpoint, guarantee, state_dir = sys.argv[1:5]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["EOS_JOB_PGID"] = str(os.getpgid(0))
    os.environ["EOS_STATE_DIR"] = state_dir
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    spark = (SparkSession.builder.master("local[2,3]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    @F.udf("binary")
    def transform(value: bytes) -> bytes:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch, part = int(ctx.getLocalProperty("streaming.sql.batchId")), ctx.partitionId()
        state, pgid = os.environ["EOS_STATE_DIR"], int(os.environ["EOS_JOB_PGID"])
        if batch == 1 and part == 0 and fire_once(state, "kill-mid"):
            os.killpg(pgid, signal.SIGKILL)
        if batch == 3 and part == 1 and fire_once(state, "kill-between-tasks"):
            time.sleep(4)
            os.killpg(pgid, signal.SIGKILL)
        if batch == 5 and part == 0 and ctx.attemptNumber() == 0 and fire_once(state, "worker-crash"):
            os._exit(1)
        return b"out-" + value

    class Killer(StreamingQueryListener):
        def onQueryStarted(self, event):  # noqa: N802 - PySpark's names
            pass

        def onQueryProgress(self, event):  # noqa: N802
            if event.progress.batchId == 7 and fire_once(state_dir, "kill-between-batches"):
                os.killpg(os.getpgid(0), signal.SIGKILL)

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            pass

    spark.streams.addListener(Killer())
    src = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "eos-in")
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200")
           .option("commitOffsetsToGroup", "eos-job").load())
    out = src.select("key", transform(F.col("value")).alias("value"), "partition")
    q = (out.writeStream.format("shoal").option("kafka.bootstrap.servers", bootstrap).option("topic", "eos-out")
         .option("deliveryGuarantee", guarantee).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    time.sleep(1)  # let the listener see the last progress
    spark.stop()


if __name__ == "__main__":
    main()
