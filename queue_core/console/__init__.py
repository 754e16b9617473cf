"""What the operator console reads and does: filtered job lists, bulk actions and charts."""
