"""``bench swap``: the swap benchmark (cold loads, pipeline runs per mode), its size
scaling (``--sizes``) and the page-cache dropping of ``--cold``."""
