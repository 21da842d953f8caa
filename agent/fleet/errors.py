"""The fleet's errors (agent/fleet/): each derives from AgentError, and its docstring says when it is raised."""

from __future__ import annotations

from vkocr.agent.errors import AgentError


class FleetError(AgentError):
    """Base of the fleet's errors, raised when a rollout, a board's update or a fleet command cannot go on (as
    one of the subclasses below)."""


class RegistryError(FleetError):
    """Raised when an OCI registry cannot be reached, refuses a push or a pull (credentials, a missing
    reference), or sends a manifest or a bundle that does not match the digest asked for."""


class BrokerError(FleetError):
    """Raised when the MQTT broker cannot be reached or refuses this client (credentials, ACL)."""


class DesiredStateError(FleetError):
    """Raised when a desired state is malformed, or names a signer the board does not trust or a version older
    than the board's high-water mark: the board installs nothing and reports why."""


class RolloutError(FleetError):
    """Raised when a rollout cannot start: no board in the group, a bundle that was not pushed, bad wave
    settings, or nothing to roll back to."""
