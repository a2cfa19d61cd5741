"""The composition root: the one package that imports the store, builds it and wires the
process together.

- :mod:`app.bootstrap.database` builds what stands on PostgreSQL (the engine, the queue service
  over the store, the read sides, the dashboard's sessions, the scheduler's maintenance, the
  database a command works on) and hands it out: the edges get the store's work from here.
- :mod:`app.bootstrap.server` assembles the HTTP server from the edges (API, dashboard, metrics,
  scheduler) and runs their lifecycle.
- :mod:`app.bootstrap.commands` assembles the ``sundial`` command from the edges' commands, with
  the commands that run the server and migrate the database.

``.importlinter`` holds these layers: the edges import nothing of each other and nothing of the
store, and nothing below imports the server or the command.
"""
