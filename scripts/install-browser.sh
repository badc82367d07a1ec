#!/usr/bin/env bash
# The report tests open reports in a real headless Chromium: the distribution's package
# (Debian: chromium), driven by Playwright with executable_path; Playwright's own browser
# download is never used (no network to its CDN). A no-op when /usr/bin/chromium exists.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y -q chromium >/dev/null 2>&1 \
  || { "${as_root[@]}" apt-get update -q >/dev/null && "${as_root[@]}" apt-get install -y -q chromium >/dev/null; }
echo "setup: chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}') installed" >&2
