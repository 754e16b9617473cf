"""Row-level security and role privileges, proven with real non-superuser roles."""
