"""Document parsing and section-aware chunking."""
