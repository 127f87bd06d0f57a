"""MultiforaDB: a MongoDB-compatible document database in one pip package.

Two ways to use it:

    import multifora
    with multifora.open("./data") as client:      # embedded: a pymongo client
        client.app.items.insert_one({"x": 1})

    with multifora.Server("./data", port=27017) as server:   # a served endpoint
        print(server.uri)                           # any MongoDB driver connects

or from a shell: ``python -m multifora serve --dbpath ./data``.
"""
from ._core import MONGODB_VERSION, MultiforaError
from .server import CommandError, EmbeddedClient, Server, default_dbpath, open

__version__ = "0.1.0"

__all__ = [
    "CommandError",
    "EmbeddedClient",
    "MONGODB_VERSION",
    "MultiforaError",
    "Server",
    "default_dbpath",
    "open",
]
