"""`python -m agentx.cli`: the `agentx` command."""

from agentx.cli import main

main()
