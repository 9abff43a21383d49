"""Registration and identity: an agent's versions and their tokens, over the repository."""

from __future__ import annotations

import datetime as dt

from rtplan.arena import identity
from rtplan.arena._errors import ArenaError
from rtplan.arena.ranked import REFERENCE_PREFIX
from rtplan.arena.records import AgentRecord, Conflict, Stale, VersionRecord
from rtplan.arena.repository import Repository


class Agents:
    """The arena's registry of agents: each version its own row and its own token.

    A name belongs to whoever registered it first: a new version of an existing agent needs a
    live token of one of its versions. A token is shown once, when made; the database keeps its
    salted hash (`identity`). Regenerating needs the current token and makes it useless;
    revoking retires the version for good (its rows stay; play on as a new version).

    Args:
        repository: the arena's storage.
    """

    def __init__(self, repository: Repository) -> None:
        self.repository = repository

    def register(
        self, name: str, version: str, *, owner_token: str | None = None
    ) -> tuple[VersionRecord, str]:
        """Registers `version` of agent `name`.

        Args:
            owner_token: for a new version of an existing agent, a live token of one of its
                versions.

        Returns:
            (the new version, its token: shown once, stored nowhere).

        Raises:
            ArenaError: duplicate_version; token_required, wrong_token or revoked_token for a
                new version of an agent without a live token of it.
        """
        if name.startswith(REFERENCE_PREFIX):
            raise ArenaError(
                "reserved_name",
                f"names starting {REFERENCE_PREFIX!r} are the arena's reference players': "
                "choose another",
            )
        for _ in range(2):  # once more when another registration created the agent meanwhile
            agent = self.repository.find_agent(name)
            if agent is not None:
                if agent.version(version) is not None:
                    raise ArenaError(
                        "duplicate_version",
                        f"agent {name} already has version {version}: register another version",
                    )
                self._check_owner(agent, owner_token)
            token, stored = identity.new_token()
            try:
                record = self.repository.add_version(name, version, stored, new_agent=agent is None)
            except Conflict as e:
                if e.what == "version":
                    raise ArenaError(
                        "duplicate_version", f"agent {name} already has version {version}"
                    ) from None
                continue
            return record, token
        raise ArenaError("duplicate_version", f"agent {name} changed meanwhile: try again")

    def reference(self, name: str, version: str) -> VersionRecord:
        """Version `version` of the reference agent `name` (one the arena enters itself),
        registered on first use; its token is thrown away (the arena plays reference runs on
        its own authority)."""
        for _ in range(2):
            agent = self.repository.find_agent(name)
            if agent is not None and agent.version(version) is not None:
                return agent.version(version)
            _, stored = identity.new_token()
            try:
                return self.repository.add_version(
                    name, version, stored, new_agent=agent is None, kind="reference"
                )
            except Conflict:
                continue
        raise ArenaError("duplicate_version", f"reference {name} changed meanwhile: try again")

    def _check_owner(self, agent: AgentRecord, token: str | None) -> None:
        if token is None:
            raise ArenaError(
                "token_required",
                f"agent {agent.name} exists: a new version of it needs a live token of one of "
                "its versions (Authorization: Bearer <token>)",
            )
        given = identity.token_id(token)
        held = next((v for v in agent.versions if v.token.token_id == given), None)
        if held is None or not identity.matches(token, held.token):
            raise ArenaError("wrong_token", f"the token is none of agent {agent.name}'s")
        if held.revoked:
            raise ArenaError("revoked_token", _revoked(held))

    def authenticate(self, name: str, version: str, token: str | None) -> VersionRecord:
        """The version `name` `version`, once `token` proves to be its live token.

        Raises:
            ArenaError: unknown_agent, unknown_version, token_required, wrong_token or
                revoked_token.
        """
        record = self.version(name, version)
        if token is None:
            raise ArenaError(
                "token_required",
                f"{name} {version}: this needs its token (Authorization: Bearer <token>)",
            )
        if not identity.matches(token, record.token):
            raise ArenaError(
                "wrong_token",
                f"the token is not {name} {version}'s current token (a regenerated token "
                "replaces the one before)",
            )
        if record.revoked:
            raise ArenaError("revoked_token", _revoked(record))
        return record

    def authenticate_token(self, token: str) -> VersionRecord:
        """The live version whose current token `token` is (what a ranked run's agent sends).

        Raises:
            ArenaError: wrong_token or revoked_token.
        """
        given = identity.token_id(token)
        record = None if given is None else self.repository.find_token(given)
        if record is None or not identity.matches(token, record.token):
            raise ArenaError(
                "wrong_token", "the token is no agent version's current token in this arena"
            )
        if record.revoked:
            raise ArenaError("revoked_token", _revoked(record))
        return record

    def regenerate(self, name: str, version: str, token: str | None) -> tuple[VersionRecord, str]:
        """A new token for `name` `version` in place of `token`, its current one.

        Returns:
            (the version, its new token: shown once).

        Raises:
            ArenaError: as `authenticate`.
        """
        record = self.authenticate(name, version, token)
        new, stored = identity.new_token()
        try:
            self.repository.replace_token(record.id, record.token.token_id, stored)
        except Stale:
            raise _changed(name, version) from None
        return self.version(name, version), new

    def revoke(self, name: str, version: str, token: str | None) -> dt.datetime:
        """Revokes `name` `version`'s token `token` for good; returns when.

        Raises:
            ArenaError: as `authenticate`.
        """
        record = self.authenticate(name, version, token)
        try:
            return self.repository.revoke(record.id, record.token.token_id)
        except Stale:
            raise _changed(name, version) from None

    def page(self, *, offset: int, limit: int) -> tuple[list[AgentRecord], int]:
        """A page of the agents by name, and how many there are."""
        return self.repository.list_agents(offset=offset, limit=limit)

    def agent(self, name: str) -> AgentRecord:
        """Agent `name` and its versions.

        Raises:
            ArenaError: unknown_agent.
        """
        agent = self.repository.find_agent(name)
        if agent is None:
            raise ArenaError("unknown_agent", f"no agent is called {name}")
        return agent

    def version(self, name: str, version: str) -> VersionRecord:
        """Version `version` of agent `name`.

        Raises:
            ArenaError: unknown_agent or unknown_version.
        """
        found = self.agent(name).version(version)
        if found is None:
            raise ArenaError("unknown_version", f"agent {name} has no version {version}")
        return found


def _revoked(record: VersionRecord) -> str:
    return (
        f"the token of {record.name} {record.version} was revoked at "
        f"{record.revoked_at:%Y-%m-%d %H:%M:%S} UTC: register a new version to play again"
    )


def _changed(name: str, version: str) -> ArenaError:
    return ArenaError(
        "wrong_token",
        f"the token of {name} {version} changed meanwhile (regenerated or revoked by another "
        "request)",
    )
