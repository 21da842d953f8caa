"""Built-in postprocessing plugins: ``regex_fields`` and ``merge_lines``."""
