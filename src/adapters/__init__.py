"""Adapters: implementations of the ports for memory, SQL, MongoDB and Redis."""
