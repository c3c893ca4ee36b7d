"""One module per family: its ``ZOO`` of :class:`tests._hf_zoo.Specimen` configs, gathered by ``tests/_hf_zoo.py``."""
