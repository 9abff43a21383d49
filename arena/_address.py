"""Where an arena listens by default: its port, and the URL a client on the same machine uses.

No import here (the `rtplan arena` commands read it while the CLI builds its parser)."""

from __future__ import annotations

#: The arena's HTTP port (the env server's is 8000).
PORT = 8100
#: The arena a client on this machine reaches when given none (or $RTPLAN_ARENA_URL).
LOCAL_URL = f"http://127.0.0.1:{PORT}"
URL_ENV = "RTPLAN_ARENA_URL"
#: The variable a client reads an agent's token from (a token on a command line shows in `ps`).
TOKEN_ENV = "RTPLAN_ARENA_TOKEN"
#: The variable `rtplan arena references` reads an arena's admin key from.
ADMIN_KEY_ENV = "RTPLAN_ARENA_ADMIN_KEY"
