"""What may leave: the shape table, the metadata-only processor, the resource guard."""
