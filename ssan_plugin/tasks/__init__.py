"""fairseq tasks of the plugin (``--user-dir`` imports every module here)."""
