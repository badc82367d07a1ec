"""`python -m auditor` runs the CLI."""

from auditor.cli import main

if __name__ == "__main__":
    main()
