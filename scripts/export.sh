#!/bin/bash
# make export: write build/linux's commits back into the series' group
# folders (scripts/export.py; `series` says which group each patch is in).
exec /usr/bin/python3 "$(dirname "$0")/export.py" "$@"
