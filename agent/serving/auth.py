"""Who may manage models (upload, activate, roll back, list, delete bundles).

With TLS, the caller's client certificate subject (its common name, as vkocr.agent.serving.tls.peer_identity reads it)
must be in ``[auth] allowed_subjects``: no certificate → UNAUTHENTICATED, a subject not listed → PERMISSION_DENIED.
Without TLS nobody may, unless the agent runs with ``[auth] dev_allow_loopback`` and the caller is on loopback
(config.validate insists that such an agent listens on loopback only). The OCR, status and health services
never ask: they stay open to every client the transport lets in.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import grpc
from google.rpc import status_pb2

from vkocr.agent.serving import rpc_status
from vkocr.agent.serving.config import AgentConfig
from vkocr.agent.serving.tls import peer_identity
from vkocr.log import get_logger

log = get_logger(__name__)


@dataclass(frozen=True)
class Decision:
    """The caller as logs name it (``subject:CN`` or ``dev-loopback:ADDRESS``), or why it is refused."""

    who: str
    refusal: status_pb2.Status | None = None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def peer_is_loopback(peer: str) -> bool:
    """``ipv4:127.0.0.1:5123`` / ``ipv6:[::1]:5123`` (gRPC's peer strings) → True; anything else → False."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        host = rest.rpartition(":")[0]
    elif kind == "ipv6":
        host = rest.rpartition(":")[0].removeprefix("[").removesuffix("]")
    else:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def decide(config: AgentConfig, peer: str, subject: str | None) -> Decision:
    """May the caller at ``peer`` with client certificate ``subject`` (None: none) manage models?"""
    auth = config.auth
    if config.tls_enabled:
        if subject is None:
            return Decision(peer, rpc_status.unauthenticated(
                "model management needs a client certificate: connect with --tls-cert/--tls-key (the agent "
                "should also set [tls] client_ca, so that every client must present one)"))
        if subject not in auth.allowed_subjects:
            return Decision(f"subject:{subject}", rpc_status.permission_denied(
                f"client certificate subject {subject!r} may not manage models; add it to [auth] "
                "allowed_subjects on the agent, or use an operator's certificate"))
        return Decision(f"subject:{subject}")
    if auth.dev_allow_loopback and peer_is_loopback(peer):
        return Decision(f"dev-loopback:{peer}")
    return Decision(peer, rpc_status.permission_denied(
        "model management needs mutual TLS with a client certificate whose subject is in [auth] "
        "allowed_subjects; for development on loopback start the agent with [auth] dev_allow_loopback = true"))


async def require_model_admin(context: grpc.aio.ServicerContext, config: AgentConfig, method: str) -> str:
    """The caller's name for the logs; aborts the RPC (PERMISSION_DENIED or UNAUTHENTICATED) when it may not
    manage models."""
    decision = decide(config, context.peer(), peer_identity(context))
    if decision.refusal is not None:
        log.warning("model_admin_refused", method=method, peer=context.peer(), who=decision.who,
                    reason=decision.refusal.message)
        await rpc_status.abort_async(context, decision.refusal)
    return decision.who
