"""The ``callbound`` command line (typer + rich). Imported only by the console script."""
