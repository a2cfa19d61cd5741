"""An Amazon SQS-compatible front door: the SQS JSON and query protocols over Sundial's queues
(docs/sqs.md)."""
