"""The plugin chains a pipeline runs (step 7 of a request: a plain function, `run_plugins`, with a time budget per
plugin): one per distinct (plugins, plugin options, budget), built once and kept. The one builder of chains, for
the agent and the local API alike.

Requests that bring their own plugin options would otherwise compile them (regular expressions included) for
every request; here a chain is built on the caller's thread (a decode thread, never the event loop), from one
registry whose entry points were read when the agent started, and kept in a bounded LRU keyed by the options
themselves. A configuration that fails to build is not kept: it fails again, cheaply, as it is size-limited.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Final

from vkocr.agent.ocr.options import OcrOptions
from vkocr.postproc.registry import PluginChain, PluginRegistry, default_registry
from vkocr.postproc.result import OcrResult

CACHED_CHAINS: Final = 64


class PluginChains:
    def __init__(self, registry: PluginRegistry | None = None, size: int = CACHED_CHAINS) -> None:
        self.registry = registry if registry is not None else default_registry()
        self.size = size
        self._chains: OrderedDict[str, PluginChain] = OrderedDict()
        self._lock = threading.Lock()
        self._deployment: tuple[str, PluginChain] | None = None  # never evicted: see `deploy`

    def __len__(self) -> int:
        return len(self._chains)

    def deploy(self, opts: OcrOptions, chain: PluginChain | None = None) -> PluginChain:
        """The deployment's chain: what every request whose plugin options are the deployment's `opts` runs
        (`chain`, else the one these options build); kept beside the cache, never evicted."""
        chain = chain if chain is not None else self.chain_for(opts)
        self._deployment = (_key(opts), chain)
        return chain

    def chain_for(self, opts: OcrOptions) -> PluginChain:
        """The chain `opts` ask for: the deployment's own, or one built (or cached) for them; raises the
        registry's PluginError when it cannot be built, before any GPU work."""
        key = _key(opts)
        deployment = self._deployment
        if deployment is not None and deployment[0] == key:
            return deployment[1]
        with self._lock:
            chain = self._chains.get(key)
            if chain is not None:
                self._chains.move_to_end(key)
                return chain
        # built outside the lock: another request's chain need not wait for this one's patterns to compile
        chain = self.registry.build_chain(opts.plugins, opts.plugin_options, budget_s=opts.plugin_budget_ms / 1e3)
        with self._lock:
            self._chains[key] = chain
            while len(self._chains) > self.size:
                self._chains.popitem(last=False)
        return chain


def _key(opts: OcrOptions) -> str:
    """What a chain is built from: the plugins, their options and the budget."""
    return json.dumps([opts.plugins, opts.plugin_options, opts.plugin_budget_ms], sort_keys=True, default=repr)


def run_plugins(result: OcrResult, chain: PluginChain) -> OcrResult:
    """The plugin chain over a recognised result (plugins record their own errors in it), timed: CPU work that
    the agent overlaps with the next request's GPU work."""
    clock = time.perf_counter()
    chain.run(result)
    result.timings_ms["plugins"] = (time.perf_counter() - clock) * 1e3
    return result
