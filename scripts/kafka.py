"""Fetch or start Apache Kafka, the reference broker: ``python scripts/kafka.py start --nodes 3``.

See tests/reference/apache_kafka.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.reference.apache_kafka import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
