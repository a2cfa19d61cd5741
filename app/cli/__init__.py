"""The operator's commands: ``sundial namespace | token | queue`` (:mod:`app.cli.admin`) and the
local replicated cluster, ``sundial dev-cluster`` (:mod:`app.cli.dev_cluster`). The ``sundial``
command itself is assembled in :mod:`app.bootstrap.commands`.
"""
