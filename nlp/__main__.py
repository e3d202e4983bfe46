import sys

from nlp.cli import main

sys.exit(main())
