"""What the SQS-compatible door keeps: a queue's dead-letter queue, a queue's SQS settings, and
access keys.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

- ``queues.dead_letter_queue``: the name of a queue of the same namespace that takes the queue's
  dead letters (``errored`` messages); the scheduler moves them there (docs/concepts.md, "Dead
  letters"). SQS's redrive policy is this and ``max_attempts``.
- ``queues.sqs``: what the SQS door keeps for a queue that Sundial's own behaviour does not read
  (SQS attributes such as ``ReceiveMessageWaitTimeSeconds``, and tags), as a JSON object.
- ``tokens.access_key_id`` and ``tokens.sealed_secret``: a token may be an SQS access key. Its
  secret access key is sealed (AES-GCM under a key the database does not hold): Signature
  Version 4 needs the secret itself to check a signature, so it cannot be a one-way hash.

The catalogue version's triggers on ``queues`` and ``tokens`` (migration 0006) cover the new
columns as they cover the others.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns."""
    op.execute(
        """
        ALTER TABLE queues ADD COLUMN dead_letter_queue text;
        ALTER TABLE queues ADD COLUMN sqs jsonb NOT NULL DEFAULT '{}';
        ALTER TABLE queues ADD CONSTRAINT queues_dead_letter_queue_check
            CHECK (dead_letter_queue IS DISTINCT FROM name);
        ALTER TABLE tokens ADD COLUMN access_key_id text;
        ALTER TABLE tokens ADD COLUMN sealed_secret bytea;
        ALTER TABLE tokens ADD CONSTRAINT tokens_access_key_id_key UNIQUE (access_key_id);
        ALTER TABLE tokens ADD CONSTRAINT tokens_access_key_check
            CHECK ((access_key_id IS NULL) = (sealed_secret IS NULL));
        """
    )


def downgrade() -> None:
    """Drop the columns."""
    op.execute(
        """
        ALTER TABLE tokens DROP COLUMN sealed_secret;
        ALTER TABLE tokens DROP COLUMN access_key_id;
        ALTER TABLE queues DROP COLUMN sqs;
        ALTER TABLE queues DROP COLUMN dead_letter_queue;
        """
    )
