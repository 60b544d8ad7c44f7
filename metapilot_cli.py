def app():\n    pass
