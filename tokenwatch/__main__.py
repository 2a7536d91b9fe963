import sys

from tokenwatch.cli import main

sys.exit(main())
