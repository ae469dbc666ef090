"""Generated from proto/palimpsest/v1 by clients/run.sh stubs; do not edit."""
