"""The SQS door against the REST API, measured in one run (bench/README.md, "SQS door"):
``SendMessageBatch`` / ``ReceiveMessage`` / ``DeleteMessageBatch`` through boto3 against
``POST …/messages`` / ``…/dequeue`` / ``…/ack`` through httpx, 10 messages per request each, on
the same server, alternating which goes first; the REST API at 100 per request beside them for
reference.

``python -m bench --only sqs [--quick | --full]``, or ``python -m bench.sqs``.

Each door is driven by a generator process of its own (``bench.sqs.clients``: one client per
thread), started and warmed up before the measurements; the harness tells it to produce, then
to consume, and reads the CPU of the server, PostgreSQL, the generator and the machine around
each phase.
"""

# The parts: the generator process and the two doors' clients (clients.py), the generators as the
# harness drives them with the CPU read around each phase (loads.py), the figures (model.py,
# pure), the report (report.py) and the run that holds them together and always cleans up
# (run.py); __main__.py is the command line.
