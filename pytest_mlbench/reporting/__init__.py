"""The normalised table, machines side by side, charts."""
