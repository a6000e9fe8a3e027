"""``python -m spottune``: the ``spottune`` command (:func:`spottune.cli.main`), for an environment whose scripts
folder is not on ``PATH``."""

from spottune.cli import main

if __name__ == "__main__":
    main()
