"""Views of a render: the chain graph (`graph`) and the pool summary (`summary`)."""
