"""Repository-level settings only: the plugin itself lives in pytest_mlbench/ and is loaded
through its pytest11 entry point."""

pytest_plugins = ("pytester",)
