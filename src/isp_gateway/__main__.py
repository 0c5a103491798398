import sys

from isp_gateway.cli import main

sys.exit(main())
