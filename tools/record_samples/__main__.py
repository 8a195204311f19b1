import sys

from .record import main

sys.exit(main())
