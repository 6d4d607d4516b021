"""``python -m msclassify.cli`` runs the command-line interface (as ``python -m msclassify``)."""

from ._main import main

raise SystemExit(main())
