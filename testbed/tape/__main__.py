"""`python -m testbed.tape`: run the tape daemon."""

import sys

from .daemon import main

sys.exit(main())
