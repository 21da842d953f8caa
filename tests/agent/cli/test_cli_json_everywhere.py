"""`--json` on every command that prints results: a command without it is one of the few that only write files
or serve, named here with the reason."""

from __future__ import annotations

from tests.cli_commands import command_parsers, subcommands

WITHOUT_JSON = {
    ("serve",): "runs the agent; its logs are JSON with --log-json",
    ("infer",): "writes the output tensor to a .npy file",
    ("calibrate",): "its result is JSON already: the precision plans, printed or written with --out",
    ("bundle", "keygen"): "writes key files",
    ("bundle", "create"): "writes a bundle (bundle inspect --json describes it)",
    ("bundle", "sign"): "rewrites a bundle (bundle verify --json checks it)",
}


def test_every_command_that_prints_results_has_json() -> None:
    leaves = {path: parser for path, parser in command_parsers() if not subcommands(parser)}
    without = {path for path, parser in leaves.items()
               if not any("--json" in action.option_strings for action in parser._actions)}
    assert without == set(WITHOUT_JSON)
    assert {("fleet", "status"), ("fleet", "rollout"), ("bundle", "verify"), ("client", "health")} <= set(leaves)
