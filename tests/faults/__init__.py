"""Database faults: dropped connections, statement timeouts, deadlock-prone races."""
