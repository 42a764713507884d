"""Routing: the table dispatchers load (``table``) and the router that acts on it (``router``)."""
