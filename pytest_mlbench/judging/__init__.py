"""The regression gate (records against a stored run), the same-machine A/B gate, and the
--mlbench-save / --mlbench-gate session objects."""
