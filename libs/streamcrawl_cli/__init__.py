"""The `streamcrawl` command: one entry point for operators, with one module per subcommand under
`streamcrawl_cli.commands`."""
