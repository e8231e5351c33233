"""The versioned record and its migrations, saved runs read and checked once, baselines on disk,
machine identity, the rounds into pytest-benchmark's JSON."""
