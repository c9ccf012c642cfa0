#!/usr/bin/env bash
# Checks packaging/blockd@.service with systemd-analyze verify.
#
# The unit names /usr/sbin/blockd, which a build tree does not install, so
# verify would only complain about the missing binary; the test copies the
# unit to a temporary folder with ExecStart pointing at the built blockd
# and verifies an instance of it (a template cannot be verified alone).
# Any output that mentions the unit is a failure: verify's exit status
# alone ignores many warnings.
set -euo pipefail
unit=$1
blockd=$2
dir=$(mktemp -d /tmp/ngnfs-unit-XXXXXX)
trap 'rm -rf "$dir"' EXIT

sed "s|^ExecStart=/usr/sbin/blockd |ExecStart=$blockd |" "$unit" >"$dir/blockd@.service"
if ! grep -q "^ExecStart=$blockd " "$dir/blockd@.service"; then
	echo "FAIL: $unit has no 'ExecStart=/usr/sbin/blockd ' line to retarget" >&2
	exit 1
fi
cp "$dir/blockd@.service" "$dir/blockd@dev0.service"
status=0
output=$(cd "$dir" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no \
	"$dir/blockd@dev0.service" 2>&1) || status=$?
relevant=$(printf '%s\n' "$output" | grep -i "blockd" || true)
if [ "$status" -ne 0 ] || [ -n "$relevant" ]; then
	echo "FAIL: systemd-analyze verify of $unit (exit $status):" >&2
	printf '%s\n' "$output" >&2
	exit 1
fi
echo "PASS: systemd-analyze verify of $unit: no warnings"
