"""``python -m msclassify.cli`` runs the command-line interface (as ``python -m msclassify``)."""

from . import main

raise SystemExit(main())
