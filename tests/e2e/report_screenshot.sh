#!/bin/sh
# A screenshot of a run's HTML report in headless Chromium (Debian package
# `chromium`), to look at the page by eye:
#   tests/e2e/report_screenshot.sh RUN_DIR [OUT.png] [KSEARCH]
# Writes RUN_DIR's report to a temporary file (the run folder is not touched)
# and the screenshot to OUT.png (default /tmp/ksearch-report.png).
set -eu
run=${1:?usage: report_screenshot.sh RUN_DIR [OUT.png] [KSEARCH]}
out=${2:-/tmp/ksearch-report.png}
ksearch=${3:-$(dirname "$0")/../../build/examples/cli/ksearch}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "report_screenshot: no Chromium here; install it with: apt-get install chromium" >&2
  exit 1
fi
page=$(mktemp /tmp/ksearch-report-XXXXXX.html)
trap 'rm -f "$page"' EXIT
"$ksearch" report "$run" -o "$page"
# --no-sandbox: Chromium refuses to run as root with its own sandbox.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --window-size=1400,2600 --screenshot="$out" "file://$page" 2>/dev/null
echo "report_screenshot: $out"
