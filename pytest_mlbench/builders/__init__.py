"""The implementations behind ``pytest_mlbench.builders.functional``: one module per framework, each
turning a model written in that framework's ops into the object ``engine/runners.py`` drives
for the case's kind of task (a trainer, an inference, a transform). Imported lazily, by the
builder a suite calls: importing this package imports no framework."""
