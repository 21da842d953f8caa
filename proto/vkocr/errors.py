"""The root of every error vkocr raises on purpose.

The engine's errors derive from `vkocr.engine.errors.EngineError`, the agent's from
`vkocr.agent.errors.AgentError` and postprocessing's from `vkocr.postproc.errors.PostprocError`; all three
from `VkocrError`, so an application catches `VkocrError` for everything, or a branch or a class for
something precise. This module imports nothing of vkocr, so every part can import it.
"""

from __future__ import annotations


class VkocrError(Exception):
    """Base of every error vkocr raises on purpose; raised only as one of its subclasses (engine, agent,
    postprocessing), so catching it catches all of them."""
