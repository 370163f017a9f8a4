"""Names shared by every module of an exported repo (the writer, the reader, the reveal check and
the publisher): file names, the private folder and the commitment column. A leaf module, so the
hub's modules import it and never each other in a circle."""

PRIVATE_DIR = "_private"
"""Sibling of the exported repos; holds the salt and the withheld targets. Never published."""

MANIFEST_FILE = "rap_manifest.json"
"""Per repo: rows, columns, content hash and sha256 of every data file, and what is withheld."""

SALT_FILE = "salt.hex"
COMMITMENT_COLUMN = "target_sha256"
HELDOUT_SUFFIX = "_heldout"
PENDING_SUFFIX = "_pending"
"""``<policy>_pending``: episodes of a living instance whose target window is not covered yet (no y)."""
