"""The suite's workloads, one module each, named as ``--only`` names them (bench/README.md, "The
workloads"): each measures Sundial through its HTTP API, checks that no message was lost, and
for the hot four (enqueue, process, wake) sets the baselines of bench/peers/ beside it."""
