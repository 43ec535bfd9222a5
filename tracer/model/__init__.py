"""The trace model every reader produces: columnar numpy arrays in frozen dataclasses."""
