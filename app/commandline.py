"""Command-line plumbing shared by the commands of several edges (the operator's, the pipeline's):
the ``NAMESPACE/QUEUE`` argument."""

from __future__ import annotations

import click


def split_queue_path(queue_path: str) -> tuple[str, str]:
    """``NAMESPACE/QUEUE`` as its two names.

    Raises:
        click.BadParameter: either name is missing.
    """
    namespace_name, _, queue_name = queue_path.partition("/")
    if not namespace_name or not queue_name:
        raise click.BadParameter("use NAMESPACE/QUEUE", param_hint="QUEUE")
    return namespace_name, queue_name
