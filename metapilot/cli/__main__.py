from metapilot.cli.app import app

app()
