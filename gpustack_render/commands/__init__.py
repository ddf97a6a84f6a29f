"""One module per command beyond render/catalog/node-patches; each exports ``command``."""
